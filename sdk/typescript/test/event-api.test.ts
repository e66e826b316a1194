/**
 * The agent API as the SDK reaches it: paths of any event, and what the
 * gateway answers mapped to the agent's answer.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { Bundle } from "./harness/bundle.js";

/** Serve flags under which a failing event is dead-lettered after two quick attempts, so that a failing test fails at once. */
export const FAST_DEAD_LETTER = ["--max-attempts", "2", "--retry-backoff", "10ms", "--max-retry-backoff", "10ms"];

test("an event whose source and id are dot segments runs a step and an effect", async (t) => {
  // `.` and `..` are path segments a URL parser or the gateway's router
  // resolves away: the SDK sends them as %2E, on a client that keeps them.
  const b = new Bundle(t);
  let plan: unknown;
  const pair = await b.start(async (ctx) => {
    plan = await ctx.step("plan", () => ({ refund: 1 }));
    await ctx.effect("refund", (key) => `r-${key.slice(-4)}`);
  }, ...FAST_DEAD_LETTER);
  await pair.gw.post({ specversion: "1.0", id: "..", source: ".", type: "t", partitionkey: "K", objectversion: 1 });
  assert.equal(await b.final(pair, "..", "K", 2, "."), "applied");
  assert.deepEqual(plan, { refund: 1 });
  const rows = await pair.gw.effects("..", ".");
  assert.equal(rows.get("step:plan")?.state, "succeeded");
  assert.equal(rows.get("refund")?.state, "succeeded");
});
