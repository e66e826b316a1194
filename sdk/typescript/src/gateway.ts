/**
 * The gateway's agent API: the steps and effects of one event
 * (docs/agents.md), over Node's http where there is one, else fetch.
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
    this.#gateways = [...gateways];
    this.#token = token;
    this.#timeoutMs = timeout * 1000;
    this.#prefix = `/v1/events/${segment(source)}/${segment(id)}`;
  }

  /** POSTs one operation on the step or effect name; resolves to the row the gateway answers. */
  async call(kind: CallKind, name: string, body: CallOp): Promise<CallRow> {
    const path = `${this.#prefix}/${kind}s/${segment(name)}`;
    const data = JSON.stringify(body);
    const headers = { "Content-Type": "application/json", [TOKEN_HEADER]: this.#token };
    const post = await poster();
    let last: unknown = "no gateway URL";
    for (const base of this.#gateways) {
      let answer: Answer;
      try {
        answer = await post(base, path, headers, data, this.#timeoutMs);
      } catch (e) {
        last = e instanceof Error && e.cause instanceof Error ? e.cause.message : e instanceof Error ? e.message : e;
        continue;
      }
      if (answer.status >= 300 && answer.status <= 399) {
        throw new GatewayError(
          `${kind} ${name}: the gateway at ${base} answered ${answer.status} to ${answer.location || "(no Location)"}: ` +
            "redirects are not followed, give the gateway's own URL",
          answer.status,
        );
      }
      if (answer.status < 200 || answer.status > 299) {
        const problem = parseObject(answer.text);
        const detail = typeof problem.detail === "string" ? problem.detail : "";
        throw new GatewayError(`${kind} ${name}: ${answer.status} ${detail}`, answer.status, problem);
      }
      return parseRow(kind, name, base, answer.text);
    }
    if (this.#gateways.length === 0) {
      throw new GatewayError(`${kind} ${name}: no gateway to call: the Agent was given no URL of the gateway's agent API`);
    }
    throw new GatewayError(`${kind} ${name}: no gateway answered: ${String(last)}`);
  }
}

/**
 * s percent-encoded as one path segment. `.` and `..` are encoded as
 * %2E: a URL parser or the gateway's router would resolve them away.
 */
export function segment(s: string): string {
  return s === "." || s === ".." ? s.replaceAll(".", "%2E") : encodeURIComponent(s);
}

/** What the gateway answered one request: its status, Location and body. */
interface Answer {
  status: number;
  location: string;
  text: string;
}

/** POSTs body to path (encoded, sent as it is) under the base URL base. */
type Post = (base: string, path: string, headers: Record<string, string>, body: string, timeoutMs: number) => Promise<Answer>;

let posting: Promise<Post> | undefined;

/**
 * How the agent API is reached: Node's http and https (in Node, Deno and
 * Bun), which send a path as it is given; elsewhere fetch, whose URL
 * parser resolves `%2E%2E` as `..`, so that an event whose source or id
 * is `.` or `..` cannot be reached there.
 */
function poster(): Promise<Post> {
  posting ??= Promise.all([import("node:http"), import("node:https")]).then(
    ([http, https]) => nodePost(http.request, https.request),
    () => fetchPost,
  );
  return posting;
}

/** A Post over Node's http.request and https.request. */
function nodePost(httpRequest: typeof import("node:http").request, httpsRequest: typeof import("node:https").request): Post {
  return (base, path, headers, body, timeoutMs) =>
    new Promise<Answer>((resolve, reject) => {
      const u = new URL(base);
      const request = u.protocol === "https:" ? httpsRequest : httpRequest;
      const req = request(
        {
          protocol: u.protocol,
          hostname: u.hostname.replace(/^\[(.*)\]$/, "$1"),
          port: u.port,
          path: u.pathname.replace(/\/+$/, "") + path,
          method: "POST",
          headers: { ...headers, "Content-Length": String(Buffer.byteLength(body)) },
          signal: AbortSignal.timeout(timeoutMs),
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("error", reject);
          res.on("end", () => {
            const location = res.headers.location;
            resolve({ status: res.statusCode ?? 0, location: location ?? "", text: Buffer.concat(chunks).toString("utf8") });
          });
        },
      );
      req.on("error", reject);
      req.end(body);
    });
}

/** A Post over fetch, for a runtime without Node's http. */
async function fetchPost(base: string, path: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<Answer> {
  if (/\/%2E(%2E)?(\/|$)/.test(path)) {
    throw new GatewayError(`${path}: fetch cannot send a path segment . or .. (this runtime has no node:http)`);
  }
  const resp = await fetch(base.replace(/\/+$/, "") + path, {
    method: "POST",
    body,
    headers,
    signal: AbortSignal.timeout(timeoutMs),
    redirect: "manual",
  });
  return { status: resp.status, location: resp.headers.get("Location") ?? "", text: await resp.text() };
}

const STATES: readonly string[] = ["pending", "succeeded", "failed", "uncertain"];

/** The row of a 2xx answer, or a GatewayError naming what is wrong with it (a proxy's HTML page, a row without a state). */
function parseRow(kind: CallKind, name: string, base: string, text: string): CallRow {
  const bad = (what: string) =>
    new GatewayError(`${kind} ${name}: the gateway at ${base} answered 2xx with ${what}: ${JSON.stringify(text.slice(0, 120))}`);
  let row: unknown;
  try {
    row = JSON.parse(text);
  } catch {
    throw bad("a body that is not JSON");
  }
  if (typeof row !== "object" || row === null || Array.isArray(row)) {
    throw bad("a body that is not a JSON object");
  }
  const r = row as Record<string, unknown>;
  if (typeof r.state !== "string" || !STATES.includes(r.state)) {
    throw bad(`no state of ${STATES.join(", ")}`);
  }
  if (r.granted === true && !(Number.isInteger(r.call) && typeof r.heartbeat_ms === "number")) {
    throw bad("a grant without its call and heartbeat_ms");
  }
  if ("retry_after_ms" in r && !(typeof r.retry_after_ms === "number" && Number.isFinite(r.retry_after_ms) && r.retry_after_ms >= 0)) {
    throw bad("a retry_after_ms that is not a number of milliseconds");
  }
  if (kind === "effect" && typeof r.idempotency_key !== "string") {
    throw bad("no idempotency_key");
  }
  return r as unknown as CallRow;
}

/** url if it is a gateway's base URL (http or https, a host, no query or fragment), else a TypeError. */
export function checkURL(url: string): string {
  let u: URL | null = null;
  try {
    u = new URL(url);
  } catch {
    u = null;
  }
  if (u === null || (u.protocol !== "http:" && u.protocol !== "https:") || u.hostname === "" || url.includes("?") || url.includes("#")) {
    throw new TypeError(
      `gateway URL ${JSON.stringify(url)} is not one: http:// or https://, a host, an optional path, no query or fragment (http://127.0.0.1:8080)`,
    );
  }
  return url;
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
