/** The effects token against a real `seqbox serve`: refused for another event, after the outcome, and without it. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { Signal } from "./harness/signal.js";
import { Bundle } from "./harness/bundle.js";
import { event } from "./harness/serve.js";

test("the token is refused for another event, after the outcome, and without the header", async (t) => {
  const b = new Bundle(t);
  const tokens = new Map<string, string>();
  const second = new Signal();
  const pair = await b.start(async (ctx) => {
    await ctx.step("plan", () => 1);
    tokens.set(ctx.id, ctx.token ?? "");
    if (ctx.id === "a2") {
      second.fire();
    }
  });
  const { gw } = pair;
  await gw.post(event("a1", "K", 1), event("a2", "K", 2));
  await gw.watch(second.fired); // a2 reaches the agent only once a1's outcome is final
  assert.equal(await gw.outcome("a1"), "applied");

  /** The status and problem of a begin on event id's refund with token (no header when null). */
  async function refused(token: string | null, id: string): Promise<[number, string]> {
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (token !== null) {
      headers["Seqbox-Effects-Token"] = token;
    }
    const resp = await fetch(`${gw.url}/v1/events/crm/${id}/effects/refund`, {
      method: "POST",
      headers,
      body: JSON.stringify({ op: "begin" }),
    });
    const problem = (await resp.json()) as { type: string };
    return [resp.status, problem.type.split("#").at(-1) ?? ""];
  }

  const a1 = tokens.get("a1")!;
  const a2 = tokens.get("a2")!;
  assert.match(a1, /^v1\./);
  assert.deepEqual(await refused(a1, "a1"), [410, "event-final"]);
  assert.deepEqual(await refused(a1, "a3"), [403, "forbidden"]);
  assert.deepEqual(await refused(a2.slice(0, -2) + "xx", "a2"), [403, "forbidden"]);
  assert.deepEqual(await refused(null, "a2"), [401, "unauthorized"]);
  assert.equal((await gw.effects("a1")).has("refund"), false, "a refused request changes nothing");
});
