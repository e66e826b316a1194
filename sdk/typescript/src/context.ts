/**
 * One event being handled: its attributes, and its memoised steps and
 * once-only effects through the gateway (docs/agents.md).
 * @module
 */

import { GatewayError, Permanent, Retry, Waiting } from "./errors.js";
import { type CallKind, type CallOp, type CallRow, EventAPI } from "./gateway.js";
import { withHeartbeat } from "./heartbeat.js";

/**
 * How many times a step or effect goes round begin before it gives up
 * for this call (a row that keeps changing under it).
 */
const ROUNDS = 4;

/** The most bytes of a step's result, as compact JSON, the gateway takes. */
export const MAX_RESULT_BYTES = 256 << 10;

/** What a step or effect name may be (docs/agents.md). */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** A structured CloudEvent as the gateway sends it. */
export interface CloudEvent {
  /** The producer's id of the event. */
  id: string;
  /** The producer: with id, the event's identity. */
  source: string;
  /** The event's type. */
  type: string;
  /** The event's payload. */
  data?: unknown;
  /** The ordering key: the business object. */
  partitionkey?: string;
  /** The object's version. */
  objectversion?: number;
  /** Every other attribute. */
  [attribute: string]: unknown;
}

/** The options of {@link Context.effect}. */
export interface EffectOptions {
  /**
   * Asks the remote side about an uncertain call by its idempotency key:
   * resolves to the reference it has, or null (or undefined) when it has
   * nothing.
   */
  reconcile?: (idempotencyKey: string) => unknown;
}

/**
 * The event the gateway dispatched, as the handler sees it: its
 * attributes and headers, {@link Context.step} and {@link Context.effect}.
 */
export class Context {
  /** The CloudEvent. */
  readonly event: CloudEvent;
  /** The event's id. */
  readonly id: string;
  /** The event's source. */
  readonly source: string;
  /** The event's type. */
  readonly type: string;
  /** The event's data (undefined without). */
  readonly data: unknown;
  /** The event's partition key: its partitionkey attribute, else the `Seqbox-Partition-Key` header (null without). */
  readonly key: string | null;
  /** The event's object version (null without). */
  readonly version: number | null;
  /** The `Idempotency-Key` of the call: the same on every retry of the event. */
  readonly idempotencyKey: string | null;
  /** The gateway's consumer. */
  readonly consumer: string | null;
  /** The event's `Seqbox-Effects-Token` (null without). */
  readonly token: string | null;
  readonly #api: EventAPI | null;
  #resultReference: string | null = null;

  /** The context of event, from the call's headers; gateways are the agent API's base URLs, timeout in seconds. */
  constructor(event: CloudEvent, headers: Headers, gateways: readonly string[], timeout = 10) {
    this.event = event;
    this.id = event.id;
    this.source = event.source;
    this.type = event.type;
    this.data = event.data;
    this.key =
      typeof event.partitionkey === "string" && event.partitionkey !== ""
        ? event.partitionkey
        : utf8(headers.get("Seqbox-Partition-Key")) || null;
    const version = headers.get("Seqbox-Object-Version");
    this.version = version ? Number.parseInt(version, 10) : typeof event.objectversion === "number" ? event.objectversion : null;
    this.idempotencyKey = headers.get("Idempotency-Key");
    this.consumer = headers.get("Seqbox-Consumer");
    this.token = headers.get("Seqbox-Effects-Token") || null;
    this.#api = this.token && gateways.length > 0 ? new EventAPI(gateways, this.source, this.id, this.token, timeout) : null;
  }

  /**
   * What the handler's effect produced (the id of the task it created), or
   * null: set, it is sent with the 2xx answer in the
   * `Seqbox-Result-Reference` header, and the gateway keeps it on the
   * event's inbox row (`seqbox inbox show`). At most 1,024 bytes of UTF-8
   * with no control character: anything else throws a RangeError where it
   * is set.
   */
  get resultReference(): string | null {
    return this.#resultReference;
  }

  set resultReference(ref: string | null) {
    if (ref !== null) {
      if (typeof ref !== "string") {
        throw new RangeError(`resultReference must be a string, not ${typeof ref}`);
      }
      if (/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(ref)) {
        throw new RangeError("resultReference holds a lone surrogate: it is not UTF-8 text");
      }
      if (new TextEncoder().encode(ref).length > MAX_RESULT_REFERENCE) {
        throw new RangeError(`resultReference is over ${MAX_RESULT_REFERENCE} bytes of UTF-8`);
      }
      if (/[\x00-\x1f\x7f-\x9f]/.test(ref)) {
        throw new RangeError("resultReference holds a control character");
      }
    }
    this.#resultReference = ref;
  }

  #gateway(): EventAPI {
    if (this.#api === null) {
      throw new Permanent("no Seqbox-Effects-Token on this call, or no gateway URL configured: steps and effects need both");
    }
    return this.#api;
  }

  /**
   * Resolves to the recorded result of the step name, or runs fn() once,
   * records its result (any JSON value; undefined is recorded as null)
   * and resolves to it. The result is what JSON gives back, the same on
   * every retry (a Date comes back a string).
   *
   * A result JSON cannot hold as it is (NaN, Infinity, a bigint, a Set
   * or Map, a function, a cycle) or over 256 KiB of JSON is recorded
   * failed and throws {@link Permanent}.
   */
  async step<T>(name: string, fn: () => T | Promise<T>): Promise<T> {
    checkName("step", name);
    const api = this.#gateway();
    for (let round = 0; round < ROUNDS; round++) {
      const row = await api.call("step", name, { op: "begin" });
      if (row.state === "succeeded") {
        return row.result as T;
      }
      if (!row.granted) {
        throw new Waiting("step", name, (row.retry_after_ms ?? 1000) / 1000);
      }
      const call = row.call;
      let result: T;
      try {
        result = await withHeartbeat(api, "step", name, call, row.heartbeat_ms, fn);
      } catch (e) {
        await recordQuietly(api, "step", name, { op: "record", call, state: "failed", error: text(e) });
        throw e;
      }
      let raw = "";
      let refusal: Permanent | null = null;
      try {
        raw = strictJSON(result ?? null);
      } catch (e) {
        refusal = new Permanent(`step ${JSON.stringify(name)}: its result cannot be recorded as JSON: ${e instanceof Error ? e.message : String(e)}`);
      }
      const size = new TextEncoder().encode(raw).length;
      if (refusal === null && size > MAX_RESULT_BYTES) {
        refusal = new Permanent(`step ${JSON.stringify(name)}: its result is ${size} bytes of JSON, over the gateway's ${MAX_RESULT_BYTES}`);
      }
      if (refusal !== null) {
        await recordQuietly(api, "step", name, { op: "record", call, state: "failed", error: text(refusal) });
        throw refusal;
      }
      const encoded = JSON.parse(raw) as T;
      await api.call("step", name, { op: "record", call, state: "succeeded", result: encoded });
      return encoded;
    }
    throw new Retry(`step ${JSON.stringify(name)} kept changing under this call`);
  }

  /**
   * Makes the call fn(idempotencyKey) once for this event and action, and
   * resolves to its reference (fn's result as a string, cut to 4096
   * bytes of UTF-8 as the ledger keeps it; "" for null or undefined).
   *
   * A call already made resolves to its recorded reference without
   * calling. fn throwing {@link Permanent} or {@link Retry} says the
   * remote side did not apply it (recorded failed); any other error
   * leaves it uncertain and throws Retry. An uncertain call (this agent
   * died mid-call, say) is never made again blind: options.reconcile asks
   * the remote side; without it, the event waits for an operator
   * (`seqbox effects resolve`).
   */
  async effect(action: string, fn: (idempotencyKey: string) => unknown, options: EffectOptions = {}): Promise<string> {
    checkName("effect", action);
    const api = this.#gateway();
    for (let round = 0; round < ROUNDS; round++) {
      let row = await api.call("effect", action, { op: "begin" });
      const key = row.idempotency_key;
      if (row.state === "succeeded") {
        return row.ref ?? "";
      }
      if (row.state === "uncertain") {
        const reconcile = options.reconcile;
        if (reconcile === undefined) {
          throw new Retry(
            `effect ${JSON.stringify(action)} (${key}) is uncertain and this agent has no reconcile: ` +
              `resolve it with \`seqbox effects resolve ${key}\``,
            { after: 5 },
          );
        }
        if (row.retry_after_ms === undefined) {
          const found = await reconcile(key);
          const applied = found !== null && found !== undefined;
          row = await api.call("effect", action, { op: "reconcile", applied, ref: applied ? cut(refText(found)) : "" });
          if (row.state === "succeeded") {
            return row.ref ?? "";
          }
        }
        if (row.state === "uncertain") {
          throw new Waiting("effect", action, (row.retry_after_ms ?? 1000) / 1000);
        }
        continue; // failed: begin grants a new call under the same key
      }
      if (!row.granted) {
        throw new Waiting("effect", action, (row.retry_after_ms ?? 1000) / 1000);
      }
      const call = row.call;
      let ref: unknown;
      try {
        ref = await withHeartbeat(api, "effect", action, call, row.heartbeat_ms, () => fn(key));
      } catch (e) {
        if (e instanceof Permanent || e instanceof Retry) {
          await recordQuietly(api, "effect", action, { op: "record", call, state: "failed", error: text(e) });
          throw e;
        }
        await recordQuietly(api, "effect", action, { op: "record", call, state: "uncertain", error: text(e) });
        throw new Retry(`effect ${JSON.stringify(action)} (${key}) may or may not have taken effect: ${text(e)}`, { cause: e });
      }
      const recorded = ref === null || ref === undefined ? "" : cut(refText(ref));
      await api.call("effect", action, { op: "record", call, state: "succeeded", ref: recorded });
      return recorded;
    }
    throw new Retry(`effect ${JSON.stringify(action)} kept changing under this call`);
  }
}

/** Throws Permanent unless name is a step's or effect's name the gateway takes. */
function checkName(kind: CallKind, name: string): void {
  if (typeof name !== "string" || !NAME.test(name) || (kind === "effect" && name === "agent")) {
    throw new Permanent(
      `${kind} name ${JSON.stringify(name)} is not allowed: a letter or digit, then up to 63 letters, digits, '.', '_' or '-' ` +
        "(and an effect may not be named 'agent', the gateway's own call)",
    );
  }
}

/**
 * value as JSON, or a TypeError for what JSON would not give back as it
 * is: NaN and Infinity (JSON.stringify writes null), a Set or Map
 * (written {}), a function or symbol, a bigint, a cycle. A Date and
 * anything else with toJSON are written as toJSON says; undefined in an
 * object is left out, in an array null, as JSON.stringify does.
 */
export function strictJSON(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === "number" && !Number.isFinite(v)) {
      throw new TypeError(`${v} is not a JSON number (NaN or Infinity)`);
    }
    if (v instanceof Set || v instanceof Map || v instanceof WeakSet || v instanceof WeakMap) {
      throw new TypeError(`a ${v.constructor.name} is not JSON (make it an array or an object)`);
    }
    if (typeof v === "function" || typeof v === "symbol") {
      throw new TypeError(`a ${typeof v} is not JSON`);
    }
    return v;
  });
}

/**
 * A header's value as the gateway wrote it, UTF-8: Node's http (and the
 * Fetch API's Headers) hand header bytes over as Latin-1 characters.
 */
function utf8(value: string | null): string | null {
  if (!value || !/[\x80-\xff]/.test(value) || /[^\x00-\xff]/.test(value)) {
    return value;
  }
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(value, (c) => c.charCodeAt(0)));
  } catch {
    return value;
  }
}

/**
 * Records a failed or uncertain call; a record that does not get
 * through leaves the row pending, which turns uncertain once its lease
 * runs out: the error that is thrown is the call's own.
 */
async function recordQuietly(api: EventAPI, kind: CallKind, name: string, body: CallOp): Promise<CallRow | undefined> {
  try {
    return await api.call(kind, name, body);
  } catch (e) {
    if (e instanceof GatewayError) {
      return undefined;
    }
    throw e;
  }
}

/** The most bytes (UTF-8) of an effect's ref and of a call's error the gateway takes. */
export const MAX_TEXT_BYTES = 4096;

/** The most bytes (UTF-8) of a result reference the gateway keeps. */
export const MAX_RESULT_REFERENCE = 1024;

/** An error as the ledger keeps it: its name and message, cut to fit. */
function text(e: unknown): string {
  return cut(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
}

/** s cut to at most limit bytes of UTF-8, at a character boundary (a lone surrogate counts the 3 bytes of U+FFFD). */
// refText is the reference a call returned, as the ledger keeps it: a
// string as it is, anything else as its JSON (an object read
// "[object Object]"), or String() of what JSON cannot hold.
function refText(ref: unknown): string {
  if (typeof ref === "string") return ref;
  try {
    const json = JSON.stringify(ref);
    if (typeof json === "string") return json;
  } catch {
    // a cycle, a BigInt: String() below
  }
  return String(ref);
}

function cut(s: string, limit = MAX_TEXT_BYTES): string {
  const bytes = new TextEncoder().encode(s);
  if (bytes.length <= limit) {
    return s;
  }
  // A character cut in two decodes as U+FFFD: drop it.
  return new TextDecoder().decode(bytes.subarray(0, limit)).replace(/\uFFFD$/, "");
}
