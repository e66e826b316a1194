/**
 * The agent contract: what Agent.handle answers for each thing a handler
 * does (Fetch API requests in, responses out), and what a real `seqbox
 * serve` makes of the answers.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Agent, type Context, type Handler, Permanent, Retry, Stale, VersionConflict } from "../src/index.js";
import { Waiting } from "../src/errors.js";
import { Bundle } from "./harness/bundle.js";
import { event } from "./harness/serve.js";

/** A POST of the event e to an agent, with the gateway's headers. */
function call(e: unknown, headers: Record<string, string> = {}): Request {
  return new Request("http://agent.test/", {
    method: "POST",
    headers: { "Content-Type": "application/cloudevents+json", ...headers },
    body: typeof e === "string" ? e : JSON.stringify(e),
  });
}

/** What an agent running handle answers for one event. */
async function answer(handle: Handler, req: Request = call(event("c1", "K", 3, { x: 1 }))): Promise<Response> {
  return new Agent(handle, [], { log: () => undefined }).handle(req);
}

describe("Agent.handle", () => {
  test("a handler's value is 200 with its JSON; undefined is 204", async () => {
    const ok = await answer(() => ({ refund: "r-1" }));
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { refund: "r-1" });
    assert.equal((await answer(() => undefined)).status, 204);
  });

  test("Permanent is 422, Retry 503 with Retry-After, Stale and VersionConflict 409 with the outcome", async () => {
    const perm = await answer(() => {
      throw new Permanent("no such order");
    });
    assert.equal(perm.status, 422);
    assert.equal(perm.headers.get("Content-Type"), "application/problem+json");
    assert.equal(((await perm.json()) as { detail: string }).detail, "no such order");
    const retry = await answer(async () => {
      throw new Retry("busy", { after: 2.5 });
    });
    assert.equal(retry.status, 503);
    assert.equal(retry.headers.get("Retry-After"), "3");
    const soon = await answer(() => {
      throw new Retry("busy", { after: 0 });
    });
    assert.equal(soon.headers.get("Retry-After"), "1", "at least a second");
    for (const [err, outcome] of [
      [new Stale("v4 is applied"), "stale"],
      [new VersionConflict(), "version_conflict"],
    ] as const) {
      const resp = await answer(() => {
        throw err;
      });
      assert.equal(resp.status, 409);
      assert.equal(((await resp.json()) as { outcome: string }).outcome, outcome);
    }
  });

  test("a wait is 503 with an agent-waits problem naming the step", async () => {
    const resp = await answer(() => {
      throw new Waiting("step", "plan", 1.2);
    });
    assert.equal(resp.status, 503);
    assert.equal(resp.headers.get("Retry-After"), "2");
    const p = (await resp.json()) as { type: string; step: string };
    assert.equal(p.type, "https://github.com/seqbox/seqbox/blob/main/docs/problems.md#agent-waits");
    assert.equal(p.step, "plan");
  });

  test("another error is 500; a body that is not a CloudEvent 400; probes 200; other methods 405", async () => {
    assert.equal((await answer(() => Promise.reject(new TypeError("oops")))).status, 500);
    for (const body of ["{", "[]", JSON.stringify({ id: "x", source: "y" })]) {
      assert.equal((await answer(() => undefined, call(body))).status, 400, body);
    }
    assert.equal((await answer(() => undefined, new Request("http://agent.test/"))).status, 200);
    assert.equal((await answer(() => undefined, new Request("http://agent.test/", { method: "PUT", body: "x" }))).status, 405);
  });

  test("the context has the event and the gateway's headers", async () => {
    let seen: Context | undefined;
    const req = call(event("c1", "K", 3, { x: 1 }), {
      "Idempotency-Key": "sbx-1",
      "Seqbox-Partition-Key": "K",
      "Seqbox-Object-Version": "3",
      "Seqbox-Consumer": "gateway",
    });
    await answer((ctx) => {
      seen = ctx;
    }, req);
    assert.ok(seen);
    assert.deepEqual(
      [seen.id, seen.source, seen.type, seen.key, seen.version, seen.idempotencyKey, seen.consumer, seen.token],
      ["c1", "crm", "order.refund_requested", "K", 3, "sbx-1", "gateway", null],
    );
    assert.deepEqual(seen.data, { x: 1 });
  });

  test("a step without the token is Permanent: 422", async () => {
    const resp = await answer((ctx) => ctx.step("plan", () => 1));
    assert.equal(resp.status, 422);
  });
});

test("the gateway dead-letters a Permanent event and records a Stale one stale", async (t) => {
  const b = new Bundle(t);
  const pair = await b.start((ctx) => {
    if (ctx.id === "p1") {
      throw new Permanent("no such order");
    }
    if (ctx.id === "st1") {
      throw new Stale("the order is already at a newer version");
    }
  });
  await pair.gw.post(event("p1", "P", 1), event("st1", "S", 1));
  assert.equal(await b.final(pair, "p1", "P", 2), "dead_lettered");
  assert.equal(await b.final(pair, "st1", "S", 2), "stale");
});
