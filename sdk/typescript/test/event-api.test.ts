/**
 * The agent API as the SDK reaches it: paths of any event, and what the
 * gateway answers mapped to the agent's answer.
 */

import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { test, type TestContext } from "node:test";
import { GatewayError } from "../src/index.js";
import { EventAPI } from "../src/gateway.js";
import { Bundle } from "./harness/bundle.js";

/** Serve flags under which a failing event is dead-lettered after two quick attempts, so that a failing test fails at once. */
export const FAST_DEAD_LETTER = ["--max-attempts", "2", "--retry-backoff", "10ms", "--max-retry-backoff", "10ms"];

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

/** A local HTTP server that answers every request with status, headers and body, and keeps what it received. */
export async function canned(
  t: TestContext,
  status: number,
  body = "",
  headers: Record<string, string> = {},
): Promise<{ url: string; received: { path: string; headers: IncomingHttpHeaders }[] }> {
  const received: { path: string; headers: IncomingHttpHeaders }[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      received.push({ path: req.url ?? "", headers: req.headers });
      res.writeHead(status, headers).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
}

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
