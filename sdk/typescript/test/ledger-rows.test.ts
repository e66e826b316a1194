/**
 * Each guarantee of a step or an effect against a real `seqbox serve`,
 * where the other tests did not check it (a hand-made mutation sweep,
 * docs/mutation.md): a step that resolves undefined memoised, a lease
 * renewed while a step runs, an uncertain call reconciled with its
 * reference or called again when the remote side has nothing, a request
 * that fails over to the next gateway URL, and an event whose source and
 * id hold reserved characters.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as tick } from "node:timers/promises";
import { Retry } from "../src/index.js";
import { Bundle, FAST_DEAD_LETTER, freeAddr } from "./harness/bundle.js";
import { event } from "./harness/serve.js";

/**
 * --agent-timeout 1s: an uncertain call may be reconciled a second after
 * it turned so; --retry-backoff 10ms: a retried attempt runs at once. The
 * agent's wait for it is bounded by --max-retry-backoff, left above the
 * second (at 10ms the event came back 20 times within it, and was
 * dead-lettered as a crash loop).
 */
const QUICK = ["--retry-backoff", "10ms", "--max-retry-backoff", "2s", "--agent-timeout", "1s"];

/** Polls cond until it is true (a wait on a state the gateway reports); fails after two minutes. */
async function until<T>(what: string, cond: () => Promise<T>): Promise<T> {
  const end = Date.now() + 120_000;
  for (;;) {
    const v = await cond();
    if (v) {
      return v;
    }
    if (Date.now() > end) {
      throw new Error(`gave up waiting for ${what}`);
    }
    await tick(20);
  }
}

test("a step that resolves undefined is memoised (recorded as null)", async (t) => {
  // A step run for what it does (a notification) resolves undefined: the
  // retry takes the recorded null, it does not run the step again or wait
  // for a call nobody makes.
  const b = new Bundle(t);
  let asked = 0;
  let runs = 0;
  const pair = await b.start(async (ctx) => {
    await ctx.step("notify", () => {
      asked++;
    });
    runs++;
    if (runs === 1) {
      throw new Retry("answered 503 after the step", { after: 0 });
    }
  }, ...FAST_DEAD_LETTER);
  await pair.gw.post(event("n1", "K", 1));
  assert.equal(await b.final(pair, "n1", "K", 2), "applied");
  assert.equal(asked, 1, "the step ran again");
  assert.equal(runs, 2);
  assert.equal((await pair.gw.effects("n1")).get("step:notify")?.state, "succeeded");
});

test("a step running longer than a heartbeat has its lease renewed", async (t) => {
  // The ledger's heartbeat is 1 s, and a lease not renewed for three of
  // them belongs to a dead caller: the step waits until its lease moves,
  // or until the lease it was granted has run out.
  const b = new Bundle(t);
  let renewed: boolean | undefined;
  const box: { lease?: () => Promise<string | undefined> } = {};
  const pair = await b.start(async (ctx) => {
    await ctx.step("think", async () => {
      const lease = box.lease!;
      const first = (await until("the step's lease", lease)) as string;
      const end = Date.parse(first);
      await until("the lease renewed, or run out", async () => (await lease()) !== first || Date.now() > end + 500);
      renewed = (await lease()) !== first;
      return "done";
    });
  });
  box.lease = async () => (await pair.gw.effects("hb1")).get("step:think")?.lease_until as string | undefined;
  await pair.gw.post(event("hb1", "K", 1));
  assert.equal(await b.final(pair, "hb1", "K", 2), "applied");
  assert.equal(renewed, true, "no heartbeat renewed the step's lease while it ran");
});

test("a call that threw after the remote side applied it is reconciled with its reference", async (t) => {
  // The connection reset after the refund was applied: the call is
  // uncertain, never made again blind; reconcile finds it by its key,
  // and the ledger keeps the reference it found.
  const b = new Bundle(t);
  const applied = new Map<string, number>();
  const refs: string[] = [];
  const pair = await b.start(async (ctx) => {
    refs.push(
      await ctx.effect(
        "refund",
        (key) => {
          applied.set(key, (applied.get(key) ?? 0) + 1);
          throw new Error("ECONNRESET after the remote side applied it");
        },
        { reconcile: (key) => (applied.has(key) ? "refund-1" : null) },
      ),
    );
  }, ...QUICK);
  await pair.gw.post(event("rc1", "K", 1));
  assert.equal(await b.final(pair, "rc1", "K", 2), "applied");
  assert.deepEqual([...applied.values()], [1], "the call was made again blind");
  assert.deepEqual(refs, ["refund-1"]);
  const row = (await pair.gw.effects("rc1")).get("refund");
  assert.deepEqual([row?.state, row?.ref], ["succeeded", "refund-1"], JSON.stringify(row));
  assert.ok(row?.reconciled_at, JSON.stringify(row));
});

test("a call the remote side never got is made again under its key", async (t) => {
  const b = new Bundle(t);
  const calls: string[] = [];
  const refs: string[] = [];
  const pair = await b.start(async (ctx) => {
    refs.push(
      await ctx.effect(
        "refund",
        (key) => {
          calls.push(key);
          if (calls.length === 1) {
            throw new Error("the request never left");
          }
          return "refund-2";
        },
        { reconcile: () => null },
      ),
    );
  }, ...QUICK);
  await pair.gw.post(event("rc2", "K", 1));
  assert.equal(await b.final(pair, "rc2", "K", 2), "applied");
  assert.equal(calls.length, 2, "the call the remote side never got was not made");
  assert.equal(calls[0], calls[1], "the second call goes under the same key");
  assert.deepEqual(refs, ["refund-2"]);
  assert.equal((await pair.gw.effects("rc2")).get("refund")?.ref, "refund-2");
});

test("a gateway URL that cannot be reached is passed over for the next", async (t) => {
  // Several serve processes on one database are one gateway.
  const b = new Bundle(t);
  const pair = await b.start((ctx) => ctx.step("plan", () => ({ refund: 1 })), ...FAST_DEAD_LETTER);
  pair.agent.agent.gateways = [`http://${await freeAddr()}`, pair.gw.url];
  await pair.gw.post(event("fo1", "K", 1));
  assert.equal(await b.final(pair, "fo1", "K", 2), "applied");
  assert.equal((await pair.gw.effects("fo1")).get("step:plan")?.state, "succeeded");
});

test("a source and id with reserved and non-ASCII characters reach their event", async (t) => {
  // Each is one path segment: '/', '?', '#', '%' and non-ASCII letters
  // percent-encoded (docs/agents.md, the endpoints).
  const b = new Bundle(t);
  const source = "https://crm.example/eu?region=1#frag";
  const id = "order/7?x=1&y=%20 é";
  let plan: unknown;
  let ref = "";
  const pair = await b.start(async (ctx) => {
    plan = await ctx.step("plan", () => ({ refund: 1 }));
    ref = await ctx.effect("refund", (key) => `r-${key.slice(-4)}`);
  }, ...FAST_DEAD_LETTER);
  await pair.gw.post({ specversion: "1.0", id, source, type: "t", partitionkey: "K", objectversion: 1 });
  assert.equal(await b.final(pair, id, "K", 2, source), "applied");
  assert.deepEqual(plan, { refund: 1 });
  const rows = await pair.gw.effects(id, source);
  assert.equal(rows.get("step:plan")?.state, "succeeded");
  assert.equal(rows.get("refund")?.ref, ref);
});
