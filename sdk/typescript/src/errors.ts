/**
 * The answers an agent's handler throws, and what the gateway makes of
 * them (docs/agents.md).
 * @module
 */

/**
 * The event can never be processed: answered 422, and the gateway
 * dead-letters it (and blocks its key under `--on-dead-letter block`).
 *
 * Thrown inside an effect's call, it also says the remote side refused
 * the call for good: the ledger records it failed (a redrive of the dead
 * letter calls again under the same idempotency key).
 */
export class Permanent extends Error {
  override name = "Permanent";
}

/** Options of {@link Retry}. */
export interface RetryOptions {
  /** Seconds to wait before the event is tried again (at least 1 is sent): finite and not negative, else the constructor throws RangeError. */
  after?: number;
  /** The error that caused it. */
  cause?: unknown;
}

/**
 * The event was not processed; try it again later: answered 503 with
 * `Retry-After` (seconds, at least 1), under the same `Idempotency-Key`.
 *
 * Thrown inside an effect's call, it also says the remote side did not
 * apply the call (a 429, a refusal that may pass later): the ledger
 * records the call failed, and the retry calls again under the same key.
 */
export class Retry extends Error {
  override name = "Retry";
  /** Seconds to wait before the event is tried again. */
  readonly after: number;

  /** A retry for reason, after `options.after` seconds (default 1). */
  constructor(reason = "retry later", options: RetryOptions = {}) {
    super(reason, options.cause === undefined ? undefined : { cause: options.cause });
    const after = options.after ?? 1;
    if (typeof after !== "number" || !Number.isFinite(after) || after < 0) {
      const shown = typeof after === "string" ? JSON.stringify(after) : String(after);
      throw new RangeError(`Retry: after is ${shown} (a ${typeof after}): seconds, a finite number not negative`);
    }
    this.after = after;
  }
}

/**
 * The agent's object is already newer than this event: answered 409 with
 * outcome `stale`; the event ends stale and its key moves on.
 */
export class Stale extends Error {
  override name = "Stale";
  /** The outcome the 409's problem names. */
  readonly outcome: "stale" | "version_conflict" = "stale";
}

/**
 * The agent holds this version from another event: answered 409 with
 * outcome `version_conflict`; the event is parked for investigation.
 */
export class VersionConflict extends Stale {
  override name = "VersionConflict";
  override readonly outcome = "version_conflict";
}

/** The gateway's answers that refuse a request about one event for good (docs/problems.md). */
const DEFINITE = new Set([400, 403, 404, 405, 413]);

/**
 * The gateway's agent API could not be reached or refused a request.
 *
 * {@link GatewayError.definite} says the refusal concerns this event
 * alone and a retry would meet it again (the gateway's 400, 403, 404,
 * 405, 413): the handler answers 422, as for {@link Permanent}, with the
 * gateway's detail. Otherwise (a 5xx, no connection) it answers 503: the
 * event is retried.
 */
export class GatewayError extends Error {
  override name = "GatewayError";
  /** The HTTP status the gateway answered (0: none answered). */
  readonly status: number;
  /** The problem document the gateway answered with (empty without). */
  readonly problem: Record<string, unknown>;
  /** Whether the refusal concerns this event alone and will not change on a retry. */
  readonly definite: boolean;

  /** An error of the agent API: message, the status and its problem. */
  constructor(message: string, status = 0, problem: Record<string, unknown> = {}) {
    super(message);
    this.status = status;
    this.problem = problem;
    this.definite = DEFINITE.has(status);
  }
}

/**
 * A step or effect of this event runs in another live caller, or an
 * uncertain call may still be running at the remote side: answered 503
 * with an agent-waits problem, which the gateway checks against its
 * ledger and retries without spending an attempt.
 */
export class Waiting extends Error {
  override name = "Waiting";
  /** Whether a step or an effect is waited for. */
  readonly kind: "step" | "effect";
  /** The step's or effect's name. */
  readonly callName: string;
  /** Seconds to wait before beginning again. */
  readonly after: number;

  /** A wait of after seconds for the step or effect callName. */
  constructor(kind: "step" | "effect", callName: string, after: number) {
    super(`waiting for ${kind} ${JSON.stringify(callName)} (${after.toFixed(1)}s)`);
    this.kind = kind;
    this.callName = callName;
    this.after = after;
  }
}
