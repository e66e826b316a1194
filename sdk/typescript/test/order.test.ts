/** Order per key against a real `seqbox serve`, while a step is leased. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { Bundle } from "./harness/bundle.js";
import { event } from "./harness/serve.js";
import { Signal } from "./harness/signal.js";

test("order per key is kept while a step is leased", async (t) => {
  const b = new Bundle(t);
  const leased = new Signal();
  const release = new Signal();
  const pair = await b.start(async (ctx) => {
    if (ctx.id === "k1") {
      await ctx.step("think", async () => {
        leased.fire();
        await release.fired;
        return "done";
      });
    }
  });
  const { agent, gw } = pair;
  await gw.post(event("k1", "K", 1));
  await gw.watch(leased.fired);
  await gw.post(event("k2", "K", 2), event("l1", "L", 1));
  await gw.watch(agent.reached.get("l1").fired); // another key flows meanwhile
  assert.equal(agent.reached.get("k2").done, false, "k2 reached the agent while k1's step was leased");
  release.fire();
  assert.equal(await b.final(pair, "k2", "K", 3), "applied");
  assert.equal(await gw.outcome("k1"), "applied");
});
