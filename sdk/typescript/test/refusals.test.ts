/**
 * A definite refusal that concerns one event (the gateway's 400, 403,
 * 404, 405, 413, or one the SDK finds before sending) ends that event,
 * answered 422 like Permanent: it is not retried, the model is not asked
 * again, and the agent's circuit does not count it. A gateway that is
 * down (5xx, no connection) is still a retry.
 */

import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";
import { Agent, type Handler } from "../src/index.js";
import { Bundle, FAST_DEAD_LETTER } from "./harness/bundle.js";
import { event } from "./harness/serve.js";
import { canned } from "./harness/canned.js";

/** What an agent running handle answers for an event with a token, its gateway at url. */
async function answer(handle: Handler, url: string): Promise<{ status: number; problem: { detail: string }; retryAfter: string | null }> {
  const agent = new Agent(handle, [url], { log: () => undefined });
  const resp = await agent.handle(
    new Request("http://agent.test/", {
      method: "POST",
      headers: { "Seqbox-Effects-Token": "v1.token" },
      body: JSON.stringify({ id: "e1", source: "crm", type: "t" }),
    }),
  );
  return { status: resp.status, problem: (await resp.json()) as { detail: string }, retryAfter: resp.headers.get("Retry-After") };
}

/** The answer for a step whose gateway answers status with problem. */
async function gatewayAnswers(t: TestContext, status: number, problem: Record<string, unknown>) {
  const gw = await canned(t, status, JSON.stringify(problem), { "Content-Type": "application/problem+json" });
  return answer((ctx) => ctx.step("plan", () => 1), gw.url);
}

describe("a refusal of the gateway", () => {
  test("about the event is permanent, with the gateway's detail", async (t) => {
    for (const [status, detail] of [
      [400, "the body is not the JSON object expected"],
      [404, "no such path"],
      [405, "method not allowed"],
      [413, "a step's result is at most 262144 bytes of JSON"],
    ] as const) {
      const got = await gatewayAnswers(t, status, { status, detail });
      assert.equal(got.status, 422, `${status}: ${JSON.stringify(got.problem)}`);
      assert.ok(got.problem.detail.includes(String(status)) && got.problem.detail.includes(detail), got.problem.detail);
      assert.equal(got.retryAfter, null);
    }
  });

  test("with another event's token (403) is permanent", async (t) => {
    // A retry carries the same token and meets the same refusal.
    const got = await gatewayAnswers(t, 403, { status: 403, detail: "the token is not this event's" });
    assert.equal(got.status, 422, JSON.stringify(got.problem));
    assert.ok(got.problem.detail.includes("not this event's"), got.problem.detail);
    assert.equal(got.retryAfter, null);
  });

  test("a conflict (409) or an event not being dispatched (410) is a retry", async (t) => {
    // docs/agents.md: a 409/410 is answered 503.
    for (const status of [409, 410]) {
      const got = await gatewayAnswers(t, status, { status, detail: "not now" });
      assert.equal(got.status, 503, `${status}: ${JSON.stringify(got.problem)}`);
      assert.ok(got.retryAfter);
    }
  });

  test("of a gateway that is down is still a retry", async (t) => {
    for (const status of [500, 502, 503]) {
      const got = await gatewayAnswers(t, status, { detail: "down" });
      assert.equal(got.status, 503, String(status));
      assert.ok(got.retryAfter);
    }
  });
});

describe("a refusal the SDK finds before sending", () => {
  /** Runs a step name whose model answers result behind a real gateway; the event's outcome, how often the model was asked, the step's row. */
  async function runStep(t: TestContext, id: string, name: string, result: () => unknown) {
    const b = new Bundle(t);
    let asked = 0;
    const pair = await b.start((ctx) => ctx.step(name, () => (asked++, result())), ...FAST_DEAD_LETTER);
    await pair.gw.post(event(id, "K", 1));
    const outcome = await b.final(pair, id, "K", 2);
    return { outcome, asked, row: (await pair.gw.effects(id)).get(`step:${name}`) };
  }

  test("a step result over the limit is permanent and the model asked once", async (t) => {
    const got = await runStep(t, "r1", "plan", () => "x".repeat(256 << 10));
    assert.deepEqual([got.outcome, got.asked, got.row?.state], ["dead_lettered", 1, "failed"]);
  });

  test("a step result JSON cannot hold (NaN, a Set, a bigint, a cycle) is permanent and the model asked once", async (t) => {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    for (const [i, value] of [{ score: Number.NaN }, [Number.POSITIVE_INFINITY], new Set([1]), new Map(), { n: 1n }, cycle].entries()) {
      const got = await runStep(t, `r2-${i}`, "plan", () => value);
      assert.deepEqual([got.outcome, got.asked, got.row?.state], ["dead_lettered", 1, "failed"], String(i));
    }
  });

  test("a bad step name is permanent and the model never asked", async (t) => {
    const got = await runStep(t, "r3", "bad name!", () => 1);
    assert.deepEqual([got.outcome, got.asked], ["dead_lettered", 0]);
  });

  test("the reasons say what was refused", async (t) => {
    const grant = { kind: "step", name: "plan", state: "pending", granted: true, call: 1, idempotency_key: "sbx-1", heartbeat_ms: 1000 };
    const gw = await canned(t, 200, JSON.stringify(grant), { "Content-Type": "application/json" });
    for (const [name, value, want] of [
      ["plan", Number.NaN, "NaN or Infinity"],
      ["plan", "x".repeat(256 << 10), "262144"],
      ["bad name!", 1, "not allowed"],
    ] as const) {
      const got = await answer((ctx) => ctx.step(name, () => value), gw.url);
      assert.equal(got.status, 422, JSON.stringify(got.problem));
      assert.ok(got.problem.detail.includes(want), got.problem.detail);
    }
  });
});
