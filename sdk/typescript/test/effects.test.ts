/**
 * Effects against a real `seqbox serve`: a tool call made once when the
 * agent answers 503 after it, and an uncertain call (the example agent
 * SIGKILLed mid-call) reconciled, never re-run blind.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { RemoteWorld } from "../examples/worlds.js";
import { Retry } from "../src/index.js";
import { AgentProcess } from "./harness/agents.js";
import { Bundle, freeAddr } from "./harness/bundle.js";
import { Remote } from "./harness/remote.js";
import { event } from "./harness/serve.js";
import { Signal } from "./harness/signal.js";

test("a tool call runs once when the agent answers 503 after calling it", async (t) => {
  const b = new Bundle(t);
  const remote = await Remote.start();
  b.defer(() => remote.close());
  const world = new RemoteWorld(remote.url);
  const refs: string[] = [];
  const pair = await b.start(async (ctx) => {
    const order = (ctx.data as { order: string }).order;
    const ref = await ctx.effect("refund", (key) => world.tool("refund", key, { order }), {
      reconcile: (key) => world.find("refund", key),
    });
    refs.push(ref);
    if (refs.length === 1) {
      throw new Retry("answered 503 after the refund", { after: 0 });
    }
  });
  await pair.gw.post(event("t1", "K", 1, { order: "o-1" }));
  assert.equal(await b.final(pair, "t1", "K", 2), "applied");
  assert.deepEqual(remote.calls("refund"), [1], "one refund");
  assert.equal(refs.length, 2);
  assert.equal(refs[0], refs[1], "the retry gets the recorded reference");
});

test("an uncertain call is reconciled, never re-run blind", async (t) => {
  // The example agent, its own process, is SIGKILLed right after the
  // remote side applied its refund and before it could record it. The
  // restarted agent finds the call uncertain, reconciles it by its
  // idempotency key and never refunds twice.
  const b = new Bundle(t);
  const remote = await Remote.start();
  b.defer(() => remote.close());
  const listen = await freeAddr();
  const gw = await b.serve(`http://${listen}/`, "--agent-timeout", "3s");
  const agents: AgentProcess[] = [];
  b.defer(async () => {
    for (const a of agents) {
      await a.kill();
    }
  });
  const killed = new Signal();
  remote.onTool = async (action) => {
    if (action === "refund" && !killed.done) {
      await agents.at(-1)!.kill();
      killed.fire();
    }
  };
  agents.push(await AgentProcess.start(listen, gw.url, remote.url));
  await gw.post(event("u1", "K", 1, { order: "o-1", amount: 20 }));
  await gw.watch(killed.fired);
  agents.push(await AgentProcess.start(listen, gw.url, remote.url));
  // The next event of the key reaches the agent once u1 is final.
  await gw.post(event("u2", "K", 2, { order: "o-2" }));
  await gw.watch(agents.at(-1)!.printed("agent: u2 done"));
  assert.equal(await gw.outcome("u1"), "applied");
  assert.deepEqual(remote.calls("refund"), [1], "never re-run blind");
  assert.equal(remote.modelCalls.get("u1/plan"), 1, "the plan was recorded before the kill");
  const rows = await gw.effects("u1");
  assert.equal(rows.get("refund")?.state, "succeeded");
  assert.ok(rows.get("refund")?.reconciled_at, JSON.stringify(rows.get("refund")));
  assert.equal(rows.get("step:plan")?.state, "succeeded");
  assert.equal(rows.get("email")?.state, "succeeded");
});

test("a reference that is not a string is kept as its JSON", async (t) => {
  // String() of an object recorded "[object Object]".
  const b = new Bundle(t);
  const refs: string[] = [];
  const pair = await b.start(async (ctx) => {
    refs.push(await ctx.effect("crm.create_task", (key) => ({ id: 42, key })));
  });
  await pair.gw.post(event("o1", "K", 1, {}));
  assert.equal(await b.final(pair, "o1", "K", 2), "applied");
  const ref = JSON.parse(refs[0]!) as { id: number; key: string };
  assert.equal(ref.id, 42);
  assert.match(ref.key, /^sbx-/);
});
