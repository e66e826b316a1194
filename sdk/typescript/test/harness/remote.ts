/**
 * The remote side of the example agent's model and tools for the tests
 * (RemoteWorld's protocol), over Node's http on loopback.
 * @module
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The model (POST /model) and the tools (POST /{action} with
 * Idempotency-Key; GET /{action}?key=K). It does not deduplicate: a tool
 * call made twice is applied twice, and counted. onTool runs after a
 * tool call is applied, before its answer.
 */
export class Remote {
  /** The remote side's base URL. */
  readonly url: string;
  /** Model calls by "event id/step". */
  readonly modelCalls = new Map<string, number>();
  /** Tool calls applied by "action key". */
  readonly toolCalls = new Map<string, number>();
  /** Runs after a tool call is applied, before its answer. */
  onTool: ((action: string, key: string) => Promise<void>) | null = null;
  readonly #refs = new Map<string, string>();
  readonly #server: Server;

  private constructor(server: Server, url: string) {
    this.#server = server;
    this.url = url;
    server.on("request", (req, res) => {
      this.#answer(req, res).catch((e: unknown) => {
        res.writeHead(500).end(String(e));
      });
    });
  }

  /** A remote side listening on a free loopback port. */
  static async start(): Promise<Remote> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return new Remote(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  }

  /** The tool calls applied for action, by key. */
  calls(action: string): number[] {
    return [...this.toolCalls].filter(([k]) => k.startsWith(action + " ")).map(([, n]) => n);
  }

  async #answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const u = new URL(req.url ?? "/", this.url);
    const action = u.pathname.replace(/^\/+|\/+$/g, "");
    if (req.method === "GET") {
      const ref = this.#refs.get(`${action} ${u.searchParams.get("key") ?? ""}`);
      json(res, ref ? 200 : 404, ref ? { ref } : {});
      return;
    }
    let raw = "";
    for await (const chunk of req) {
      raw += String(chunk);
    }
    const body = JSON.parse(raw) as { id?: string; step?: string; data?: { amount?: number } };
    if (action === "model") {
      const k = `${body.id}/${body.step}`;
      const n = (this.modelCalls.get(k) ?? 0) + 1;
      this.modelCalls.set(k, n);
      json(res, 200, { refund: body.data?.amount ?? 0, to: "c@example.com", answer: n });
      return;
    }
    const key = String(req.headers["idempotency-key"] ?? "");
    const k = `${action} ${key}`;
    this.toolCalls.set(k, (this.toolCalls.get(k) ?? 0) + 1);
    const ref = this.#refs.get(k) ?? `${action}-${this.#refs.size + 1}`;
    this.#refs.set(k, ref);
    await this.onTool?.(action, key);
    json(res, 200, { ref });
  }

  /** Stops listening and drops its connections. */
  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
}
