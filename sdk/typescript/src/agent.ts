/**
 * The agent contract of `seqbox serve --agent-url` (docs/gateway.md,
 * docs/agents.md) on the Fetch API: a Request in, a Response out, for
 * whatever serves HTTP.
 * @module
 */

import type { Server } from "node:http";
import { type CloudEvent, Context, strictJSON } from "./context.js";
import { GatewayError, Permanent, Retry, Stale, Waiting } from "./errors.js";
import { checkURL } from "./gateway.js";
import { toNodeListener } from "./node.js";
import { PROBLEMS, problem, retryLater } from "./problem.js";

/**
 * The agent's own work on one event. It resolves to undefined (answered
 * 204) or a JSON value (200), or throws {@link Permanent} (422),
 * {@link Retry} (503 with `Retry-After`), {@link Stale} or
 * {@link VersionConflict} (409 with the outcome).
 */
export type Handler = (ctx: Context) => unknown;

/** A value as an error message names it: a string quoted, with its type. */
function shown(value: unknown): string {
  return `${typeof value === "string" ? JSON.stringify(value) : String(value)} (a ${value === null ? "null" : typeof value})`;
}

/** The options of an {@link Agent}. */
export interface AgentOptions {
  /** Seconds a request of the agent API may take (default 10; finite and more than 0, or the Agent throws). */
  timeout?: number;
  /** Where the agent logs a handler's unexpected error (default: stderr). */
  log?: (message: string) => void;
}

/**
 * An agent: {@link Agent.handle} answers the gateway's calls, running the
 * handler once the event is parsed, with a {@link Context}.
 */
export class Agent {
  /** The agent's work on one event. */
  readonly handler: Handler;
  #gateways: string[] = [];
  /** Seconds a request of the agent API may take. */
  readonly timeout: number;
  readonly #log: (message: string) => void;

  /** An agent running handler, reaching the agent API at gateways (one base URL or several). */
  constructor(handler: Handler, gateways: string | readonly string[], options: AgentOptions = {}) {
    if (typeof handler !== "function") {
      throw new TypeError(`Agent: handler is ${shown(handler)}: a function of ctx`);
    }
    const timeout = options.timeout ?? 10;
    if (typeof timeout !== "number") {
      throw new TypeError(`Agent: timeout is ${shown(timeout)}: seconds, a number`);
    }
    if (!Number.isFinite(timeout) || timeout <= 0) {
      throw new RangeError(`Agent: timeout is ${timeout}: seconds, finite and more than 0`);
    }
    this.handler = handler;
    this.gateways = typeof gateways === "string" ? [gateways] : gateways;
    this.timeout = timeout;
    this.#log = options.log ?? ((message) => console.error(message));
  }

  /**
   * The base URLs of the gateway's agent API (several serve processes
   * on one database are one gateway). Set it before the first event when
   * the gateway starts after the agent; a URL that is not one (http or
   * https, a host, no query or fragment) throws TypeError.
   */
  get gateways(): string[] {
    return this.#gateways;
  }

  set gateways(gateways: readonly string[]) {
    this.#gateways = gateways.map(checkURL);
  }

  /**
   * Answers one request of the gateway: a Fetch API handler, bound to
   * the agent (pass `agent.handle` to any framework that takes one). GET
   * and HEAD answer 200, for probes; a POST whose body is not a
   * structured CloudEvent 400; another error of the handler 500, which
   * the gateway retries.
   */
  readonly handle = async (request: Request): Promise<Response> => {
    if (request.method === "GET" || request.method === "HEAD") {
      return new Response(request.method === "HEAD" ? null : "seqbox agent\n", {
        status: 200,
        headers: { "Content-Type": "text/plain" },
      });
    }
    if (request.method !== "POST") {
      return problem(405, "Method Not Allowed", "POST an event, GET or HEAD to probe");
    }
    let ctx: Context;
    try {
      ctx = new Context(parseEvent(await request.text()), request.headers, this.gateways, this.timeout);
    } catch (e) {
      return problem(400, "Bad Request", `the body is not a structured CloudEvent: ${e instanceof Error ? e.message : String(e)}`);
    }
    let out: unknown;
    try {
      out = await this.handler(ctx);
    } catch (e) {
      return this.#answerError(ctx, e);
    }
    // The reference's UTF-8 bytes, one header character each: the
    // gateway reads the header's bytes, and a Headers value is a ByteString.
    const named: Record<string, string> =
      ctx.resultReference === null
        ? {}
        : { "Seqbox-Result-Reference": String.fromCharCode(...new TextEncoder().encode(ctx.resultReference)) };
    if (out === undefined) {
      return new Response(null, { status: 204, headers: named });
    }
    let body: string;
    try {
      body = strictJSON(out);
    } catch (e) {
      const reason = e instanceof Error ? e.message : String(e);
      this.#log(`seqbox agent: the handler's result on ${ctx.id} is not JSON: ${reason}`);
      return problem(500, "Internal Server Error", `the handler's result is not JSON (NaN or Infinity, a bigint, a Set, a cycle...): ${reason}`);
    }
    return new Response(body, { status: 200, headers: { "Content-Type": "application/json", ...named } });
  };

  /** What an error the handler threw answers. */
  #answerError(ctx: Context, e: unknown): Response {
    if (e instanceof Stale) {
      return problem(409, "Conflict", e.message || e.outcome, { outcome: e.outcome });
    }
    if (e instanceof Permanent) {
      return problem(422, "Unprocessable Content", e.message);
    }
    if (e instanceof Waiting) {
      return retryLater(e.message, e.after, { type: PROBLEMS + "agent-waits", [e.kind]: e.callName });
    }
    if (e instanceof Retry) {
      return retryLater(e.message, e.after);
    }
    if (e instanceof GatewayError) {
      if (e.definite) {
        return problem(422, "Unprocessable Content", `the gateway refused it: ${e.message}`);
      }
      return retryLater(e.message, 1);
    }
    this.#log(`seqbox agent: the handler failed on ${ctx.id}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    const name = e instanceof Error ? e.name : typeof e;
    return problem(500, "Internal Server Error", `${name}: ${e instanceof Error ? e.message : String(e)}`);
  }

  /**
   * Serves the agent over Node's `http` (imported only here, so the rest
   * runs wherever the Fetch API does) on host:port until the process
   * ends; resolves to the server once it listens (its address() has the
   * port when port is 0).
   */
  async serve(host: string, port: number): Promise<Server> {
    const { createServer } = await import("node:http");
    const server = createServer(toNodeListener(this.handle));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    return server;
  }
}

/** body as a CloudEvent with id, source and type, or throws. */
function parseEvent(body: string): CloudEvent {
  const event: unknown = JSON.parse(body);
  if (typeof event !== "object" || event === null || Array.isArray(event)) {
    throw new Error("not a JSON object");
  }
  const e = event as Record<string, unknown>;
  for (const a of ["id", "source", "type"]) {
    if (typeof e[a] !== "string") {
      throw new Error("not a CloudEvent with id, source and type");
    }
  }
  return e as CloudEvent;
}
