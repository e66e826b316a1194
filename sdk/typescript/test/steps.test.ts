/** A step against a real `seqbox serve`: the model asked once across a retried event. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { Retry } from "../src/index.js";
import { Bundle } from "./harness/bundle.js";
import { event } from "./harness/serve.js";

test("a step runs once across a retried event", async (t) => {
  const b = new Bundle(t);
  let asked = 0;
  const plans: unknown[] = [];
  const pair = await b.start(async (ctx) => {
    const plan = await ctx.step("plan", async () => ({ refund: 20, answer: ++asked }));
    plans.push(plan);
    if (plans.length === 1) {
      throw new Retry("the agent's database hiccupped after the model answered", { after: 0 });
    }
  });
  await pair.gw.post(event("s1", "K", 1, { order: "o-1" }));
  assert.equal(await b.final(pair, "s1", "K", 2), "applied");
  assert.equal(asked, 1, "the model is asked once");
  assert.deepEqual(plans, [
    { refund: 20, answer: 1 },
    { refund: 20, answer: 1 },
  ]);
  const rows = await pair.gw.effects("s1");
  assert.equal(rows.get("step:plan")?.state, "succeeded");
});

test("a step that throws is recorded failed and run again on the retry", async (t) => {
  const b = new Bundle(t);
  let asked = 0;
  const pair = await b.start(async (ctx) => {
    return ctx.step("plan", () => {
      asked++;
      if (asked === 1) {
        throw new Error("the model timed out");
      }
      return "planned";
    });
  });
  await pair.gw.post(event("f1", "K", 1));
  assert.equal(await b.final(pair, "f1", "K", 2), "applied");
  assert.equal(asked, 2, "a failed step is not memoised");
});
