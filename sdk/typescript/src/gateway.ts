/**
 * The gateway's agent API: the steps and effects of one event
 * (docs/agents.md), over fetch.
 * @module
 */

import { GatewayError } from "./errors.js";

/** The header that carries the event's capability on the agent API. */
export const TOKEN_HEADER = "Seqbox-Effects-Token";

/** Whether a request of the agent API is about a step or an effect. */
export type CallKind = "step" | "effect";

/** A ledger row's state (docs/agents.md). */
export type CallState = "pending" | "succeeded" | "failed" | "uncertain";

/**
 * A step or effect of the event as the gateway answers it: the ledger's
 * row after the operation (the OpenAPI document's `AgentCall`).
 */
export interface CallRow {
  /** Whether the row is a step or an effect. */
  kind: CallKind;
  /** The step's or effect's name. */
  name: string;
  /** The row's state. */
  state: CallState;
  /** This request holds the row as pending for call `call`. */
  granted: boolean;
  /** How many calls the row has counted; the granted call's number. */
  call: number;
  /** The key to pass to the remote side, the same on every retry. */
  idempotency_key: string;
  /** How often a granted call renews its lease. */
  heartbeat_ms: number;
  /** A succeeded effect's reference. */
  ref?: string;
  /** A succeeded step's result. */
  result?: unknown;
  /** The error its last call recorded. */
  last_error?: string;
  /** A pending call's lease. */
  lease_until?: string;
  /** Set when the caller should wait and begin again. */
  retry_after_ms?: number;
}

/** One operation of the agent API (the OpenAPI document's `AgentCallRequest`). */
export interface CallOp {
  /** begin, heartbeat, record or reconcile. */
  op: "begin" | "heartbeat" | "record" | "reconcile";
  /** The call number begin granted (heartbeat, record). */
  call?: number;
  /** What the call came to (record). */
  state?: "succeeded" | "failed" | "uncertain";
  /** A step's result (record succeeded). */
  result?: unknown;
  /** An effect's reference (record succeeded, reconcile applied). */
  ref?: string;
  /** Why a call failed or is uncertain (record). */
  error?: string;
  /** What the remote side says of the idempotency key (reconcile). */
  applied?: boolean;
}

/**
 * The agent API of one event, reached with its `Seqbox-Effects-Token`.
 *
 * gateways lists the gateway's base URLs (several serve processes on one
 * database are one gateway); a request that cannot reach one tries the
 * next. A request the gateway answers with an error is not tried
 * elsewhere: it throws {@link GatewayError} with the status and problem.
 */
export class EventAPI {
  readonly #gateways: string[];
  readonly #token: string;
  readonly #timeoutMs: number;
  readonly #prefix: string;

  /** The API of the event (source, id), with its token; timeout in seconds per request. */
  constructor(gateways: readonly string[], source: string, id: string, token: string, timeout = 10) {
    this.#gateways = gateways.map((g) => g.replace(/\/+$/, ""));
    this.#token = token;
    this.#timeoutMs = timeout * 1000;
    this.#prefix = `/v1/events/${encodeURIComponent(source)}/${encodeURIComponent(id)}`;
  }

  /** POSTs one operation on the step or effect name; resolves to the row the gateway answers. */
  async call(kind: CallKind, name: string, body: CallOp): Promise<CallRow> {
    const path = `${this.#prefix}/${kind}s/${encodeURIComponent(name)}`;
    const data = JSON.stringify(body);
    let last: unknown = "no gateway URL";
    for (const base of this.#gateways) {
      let resp: Response;
      let text: string;
      try {
        resp = await fetch(base + path, {
          method: "POST",
          body: data,
          headers: { "Content-Type": "application/json", [TOKEN_HEADER]: this.#token },
          signal: AbortSignal.timeout(this.#timeoutMs),
          redirect: "manual",
        });
        text = await resp.text();
      } catch (e) {
        last = e instanceof Error && e.cause instanceof Error ? e.cause.message : e;
        continue;
      }
      if (!resp.ok) {
        const problem = parseObject(text);
        const detail = typeof problem.detail === "string" ? problem.detail : "";
        throw new GatewayError(`${kind} ${name}: ${resp.status} ${detail}`, resp.status, problem);
      }
      return JSON.parse(text) as CallRow;
    }
    throw new GatewayError(`${kind} ${name}: no gateway answered: ${String(last)}`);
  }
}

/** text as a JSON object, or an empty one. */
function parseObject(text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
