/**
 * The model and the two tools (a refund and an email) of the example
 * agent: stubs in this process, or HTTP calls to a remote side.
 * @module
 */

import { type Context, Permanent } from "../src/index.js";

/** What the model plans for a refund request. */
export interface Plan {
  /** The amount to refund (0: none). */
  refund: number;
  /** Whom to email. */
  to: string;
}

/** The model and the tools the example agent calls. */
export interface World {
  /** Asks the model to plan the event (the step named step). */
  model(ctx: Context, step: string): Promise<Plan>;
  /** Makes the tool call action under its idempotency key; resolves to its reference. */
  tool(action: string, key: string, body: Record<string, unknown>): Promise<string>;
  /** Finds a tool call by its idempotency key: its reference, or null. */
  find(action: string, key: string): Promise<string | null>;
}

/** The model and the tools as stubs in this process that print what they do. */
export class LocalWorld implements World {
  /** Tool calls by idempotency key (a real remote side keeps them). */
  readonly #done = new Map<string, string>();

  /** Plans the refund the event's data asks for. */
  async model(ctx: Context, step: string): Promise<Plan> {
    console.log(`model: asked to ${step} ${ctx.id}`);
    const data = (ctx.data ?? {}) as { amount?: number; customer?: string };
    return { refund: data.amount ?? 0, to: data.customer ?? "customer@example.com" };
  }

  /** Prints the call; a key seen before gets its first reference. */
  async tool(action: string, key: string, body: Record<string, unknown>): Promise<string> {
    const ref = this.#done.get(key) ?? `${action}-${this.#done.size + 1}`;
    this.#done.set(key, ref);
    console.log(`${action}: ${ref} ${sortedJSON(body)} (key ${key})`);
    return ref;
  }

  /** The reference of the call made under key. */
  async find(_action: string, key: string): Promise<string | null> {
    return this.#done.get(key) ?? null;
  }
}

/**
 * The model and the tools behind a remote base URL: POST /model, POST
 * /refund and /email with the Idempotency-Key header, and GET
 * /refund?key=K and /email?key=K to find a call by its key (404: none).
 */
export class RemoteWorld implements World {
  readonly #base: string;

  /** The remote side at base. */
  constructor(base: string) {
    this.#base = base.replace(/\/+$/, "");
  }

  async #post(path: string, body: unknown, key?: string): Promise<Record<string, unknown>> {
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (key) {
      headers["Idempotency-Key"] = key;
    }
    const resp = await fetch(this.#base + path, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    if (resp.status >= 400 && resp.status < 500 && resp.status !== 408 && resp.status !== 429) {
      throw new Permanent(`${path} refused: ${resp.status}`);
    }
    if (!resp.ok) {
      throw new Error(`${path}: ${resp.status}`);
    }
    return (await resp.json()) as Record<string, unknown>;
  }

  /** POST /model with the event and the step. */
  async model(ctx: Context, step: string): Promise<Plan> {
    return (await this.#post("/model", { source: ctx.source, id: ctx.id, step, data: ctx.data })) as unknown as Plan;
  }

  /** POST /{action} with the key. */
  async tool(action: string, key: string, body: Record<string, unknown>): Promise<string> {
    return String((await this.#post(`/${action}`, body, key)).ref);
  }

  /** GET /{action}?key=K. */
  async find(action: string, key: string): Promise<string | null> {
    const resp = await fetch(`${this.#base}/${action}?key=${encodeURIComponent(key)}`, { signal: AbortSignal.timeout(10_000) });
    if (resp.status === 404) {
      return null;
    }
    if (!resp.ok) {
      throw new Error(`find ${action}: ${resp.status}`);
    }
    return String(((await resp.json()) as { ref: unknown }).ref);
  }
}

/** v as JSON with its members sorted by name. */
function sortedJSON(v: Record<string, unknown>): string {
  return JSON.stringify(Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))));
}
