/**
 * The agent API as the SDK reaches it: paths of any event, and what the
 * gateway answers mapped to the agent's answer.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { Agent, GatewayError } from "../src/index.js";
import { EventAPI } from "../src/gateway.js";
import { Bundle, FAST_DEAD_LETTER } from "./harness/bundle.js";
import { canned } from "./harness/canned.js";


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

test("a redirect is refused and its target never contacted", async (t) => {
  // The token opens the event's steps and effects: it goes to the
  // gateway's URL and nowhere else (DESIGN.md: redirects are never followed).
  const elsewhere = await canned(t, 200, JSON.stringify({ state: "succeeded", result: 1 }), { "Content-Type": "application/json" });
  for (const status of [301, 302, 307, 308]) {
    const gateway = await canned(t, status, "", { Location: `${elsewhere.url}/v1/events/crm/e1/steps/plan` });
    const err = await new EventAPI([gateway.url], "crm", "e1", "v1.secret-token").call("step", "plan", { op: "begin" }).then(
      () => assert.fail("no error"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof GatewayError, String(err));
    assert.equal(err.status, status);
    assert.match(err.message, new RegExp(`${status}`));
    assert.ok(err.message.includes(elsewhere.url), `the error names the Location: ${err.message}`);
    assert.equal(gateway.received.length, 1);
  }
  assert.deepEqual(elsewhere.received, [], "the redirect's target was contacted");
});

test("an answer that is not a row is a GatewayError naming the problem", async (t) => {
  for (const [body, contentType, want] of [
    ["<html><body>proxy login</body></html>", "text/html", "not JSON"],
    ['{"granted":true}', "application/json", "state"],
    ['{"state":"sleeping"}', "application/json", "state"],
    ['{"state":"pending","granted":true}', "application/json", "call"],
    ["[1]", "application/json", "not a JSON object"],
  ] as const) {
    const gw = await canned(t, 200, body, { "Content-Type": contentType });
    const err = await new EventAPI([gw.url], "crm", "e1", "v1.token").call("step", "plan", { op: "begin" }).then(
      () => assert.fail(`no error for ${body}`),
      (e: unknown) => e,
    );
    assert.ok(err instanceof GatewayError, `${body}: ${String(err)}`);
    assert.ok(err.message.includes(want), err.message);
  }
  const gw = await canned(t, 200, "<html></html>", { "Content-Type": "text/html" });
  const resp = await new Agent((ctx) => ctx.step("plan", () => 1), [gw.url], { log: () => undefined }).handle(
    new Request("http://agent.test/", {
      method: "POST",
      headers: { "Seqbox-Effects-Token": "v1.token" },
      body: JSON.stringify({ id: "e1", source: "crm", type: "t" }),
    }),
  );
  assert.equal(resp.status, 503);
});

test("a gateway URL that is not one is refused at once", () => {
  for (const bad of ["127.0.0.1:8080", "ftp://gw", "http://", "http://gw/?q=1", "http://gw/#f", ""]) {
    assert.throws(() => new Agent(() => undefined, bad), TypeError, bad);
    assert.throws(() => new Agent(() => undefined, ["http://127.0.0.1:8080", bad]), TypeError, bad);
    const agent = new Agent(() => undefined, []);
    assert.throws(() => {
      agent.gateways = [bad];
    }, TypeError, bad);
  }
  const ok = new Agent(() => undefined, ["http://127.0.0.1:8080/", "https://gw.example/prefix"]);
  assert.deepEqual(ok.gateways, ["http://127.0.0.1:8080/", "https://gw.example/prefix"]);
});
