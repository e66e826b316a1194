/**
 * What Agent.handle answers for what a handler returns or throws, when
 * that cannot be said as it is: a 500 problem (JSON), never a rejection
 * out of handle or a header that is not a number.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { Agent, type Handler, Retry } from "../src/index.js";
import { EventAPI } from "../src/gateway.js";

/** What an agent running handle answers for one event. */
async function answer(handle: Handler): Promise<Response> {
  return new Agent(handle, [], { log: () => undefined }).handle(
    new Request("http://agent.test/", { method: "POST", body: JSON.stringify({ id: "e1", source: "crm", type: "t" }) }),
  );
}

/** resp's problem, checked to be a 500 problem+json. */
async function problem500(resp: Response, what: string): Promise<{ status: number; detail: string }> {
  assert.equal(resp.status, 500, what);
  assert.equal(resp.headers.get("Content-Type"), "application/problem+json", what);
  const p = (await resp.json()) as { status: number; detail: string };
  assert.equal(p.status, 500, what);
  return p;
}

test("a result JSON cannot hold as it is is a 500 problem", async () => {
  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  for (const [what, value] of [
    ["a bigint", 1n],
    ["a cycle", cycle],
    ["NaN", Number.NaN],
    ["Infinity in an array", [Number.POSITIVE_INFINITY]],
    ["a Set", new Set([1])],
  ] as const) {
    await problem500(await answer(() => value), what);
  }
});

test("Retry's after that is not a number is named as what it is", () => {
  // It read "after is 5" for the string "5", which looks like a number.
  assert.throws(() => new Retry("later", { after: "5" as unknown as number }), /after is "5" \(a string\)/);
});

test("Retry's after must be finite and not negative", async () => {
  for (const after of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -1]) {
    assert.throws(() => new Retry("later", { after }), RangeError, String(after));
    const p = await problem500(
      await answer(() => {
        throw new Retry("later", { after });
      }),
      String(after),
    );
    assert.match(p.detail, /after/);
  }
  const soon = await answer(() => {
    throw new Retry("later", { after: 0 });
  });
  assert.equal(soon.headers.get("Retry-After"), "1");
});

test("an Agent's timeout that is no positive number is refused at once", () => {
  // Before, -1 or NaN was taken, and each call of the agent API then
  // failed: every event answered 503, forever.
  for (const timeout of [-1, 0, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(() => new Agent(() => undefined, [], { timeout }), RangeError, String(timeout));
  }
  assert.throws(() => new Agent(() => undefined, [], { timeout: "5" as unknown as number }), /timeout is "5" \(a string\)/);
  assert.equal(new Agent(() => undefined, [], { timeout: 2 }).timeout, 2);
});

test("an Agent's handler that is no function is refused at once", () => {
  assert.throws(() => new Agent(null as unknown as Handler, []), /handler is null \(a null\)/);
});

test("a call with no gateway says the agent has none", async () => {
  // Before: "no gateway answered: undefined".
  await assert.rejects(new EventAPI([], "crm", "e1", "token").call("step", "draft", { op: "begin" }), /no gateway to call/);
});
