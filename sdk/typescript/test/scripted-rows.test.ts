/**
 * What the SDK makes of ledger rows a real gateway gives only in a race
 * or a hang, scripted by a local server that answers each op of the agent
 * API with a row (or not at all): a call another caller runs, an
 * uncertain call that may still be running after a reconcile, a gateway
 * that does not answer.
 */

import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test, type TestContext } from "node:test";
import { Agent, type Handler } from "../src/index.js";

const WAITS = "https://github.com/seqbox/seqbox/blob/main/docs/problems.md#agent-waits";

/** A local server answering each op with rows[op] (200 JSON), or nothing while hang; keeps the ops in order. */
async function scripted(t: TestContext, rows: Record<string, unknown>, hang = false): Promise<{ url: string; ops: string[] }> {
  const ops: string[] = [];
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (chunk: Buffer) => (raw += String(chunk)));
    req.on("end", () => {
      const op = String((JSON.parse(raw || "{}") as { op?: string }).op);
      ops.push(op);
      if (!hang) {
        res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(rows[op]));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, ops };
}

/** What an agent running handle answers for an event with a token, its gateway at url. */
async function answer(handle: Handler, url: string, timeout = 10) {
  const agent = new Agent(handle, [url], { log: () => undefined, timeout });
  const resp = await agent.handle(
    new Request("http://agent.test/", {
      method: "POST",
      headers: { "Seqbox-Effects-Token": "v1.token" },
      body: JSON.stringify({ id: "e1", source: "crm", type: "t" }),
    }),
  );
  return { status: resp.status, problem: (await resp.json()) as Record<string, unknown>, retryAfter: resp.headers.get("Retry-After") };
}

test("an effect another caller is making is a wait of its retry_after_ms", async (t) => {
  const gw = await scripted(t, {
    begin: { kind: "effect", name: "refund", state: "pending", granted: false, call: 1, idempotency_key: "sbx-1", heartbeat_ms: 1000, retry_after_ms: 1500 },
  });
  let called = 0;
  const got = await answer((ctx) => ctx.effect("refund", () => called++), gw.url);
  assert.equal(got.status, 503, JSON.stringify(got.problem));
  assert.equal(got.retryAfter, "2", "retry_after_ms is milliseconds: 1.5 s, rounded up");
  assert.deepEqual([got.problem.type, got.problem.effect], [WAITS, "refund"]);
  assert.equal(called, 0, "the call was made while another caller makes it");
});

test("an uncertain call that may still run after a reconcile is a wait, not a success", async (t) => {
  const row = { kind: "effect", name: "refund", state: "uncertain", granted: false, call: 1, idempotency_key: "sbx-1", heartbeat_ms: 1000 };
  const gw = await scripted(t, { begin: row, reconcile: { ...row, retry_after_ms: 2000 } });
  let called = 0;
  let done = 0;
  const got = await answer(async (ctx) => {
    await ctx.effect("refund", () => called++, { reconcile: () => null });
    done++;
  }, gw.url);
  assert.equal(got.status, 503, JSON.stringify(got.problem));
  assert.deepEqual([got.problem.type, got.problem.effect], [WAITS, "refund"]);
  assert.equal(got.retryAfter, "2");
  assert.deepEqual([called, done], [0, 0], "the effect was taken as made, or made again blind");
  assert.deepEqual(gw.ops, ["begin", "reconcile"]);
});

test("a gateway that does not answer is given up after the timeout", { timeout: 30_000 }, async (t) => {
  const gw = await scripted(t, {}, true);
  // The test's own timeout bounds a failure: the answer comes after 0.2 s.
  const got = await answer((ctx) => ctx.step("plan", () => 1), gw.url, 0.2);
  assert.equal(got.status, 503, JSON.stringify(got.problem));
  assert.ok(got.retryAfter);
  assert.deepEqual(gw.ops, ["begin"]);
});
