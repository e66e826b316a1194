/**
 * The lease of a granted call, renewed while the call runs.
 * @module
 */

import type { CallKind, EventAPI } from "./gateway.js";

/**
 * Runs fn while renewing the granted call's lease every heartbeatMs: a
 * lease not renewed for three heartbeats belongs to a dead caller. A
 * heartbeat that fails is left alone: the record that follows says
 * whether the call still holds its row. Resolves (or rejects) as fn
 * does, once the last heartbeat sent has been answered.
 */
export async function withHeartbeat<T>(
  api: EventAPI,
  kind: CallKind,
  name: string,
  call: number,
  heartbeatMs: number,
  fn: () => T | Promise<T>,
): Promise<T> {
  let inFlight: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    inFlight = inFlight.then(() => api.call(kind, name, { op: "heartbeat", call }).catch(() => undefined));
  }, Math.max(heartbeatMs, 100));
  try {
    return await fn();
  } finally {
    clearInterval(timer);
    await inFlight;
  }
}
