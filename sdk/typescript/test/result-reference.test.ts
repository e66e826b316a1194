/**
 * A handler names what its effect produced (ctx.resultReference): the
 * agent sends it in the Seqbox-Result-Reference header of its 2xx answer,
 * and the gateway keeps it on the event's inbox row.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { Agent, type Handler } from "../src/index.js";
import { Bundle } from "./harness/bundle.js";
import { event } from "./harness/serve.js";

/** What an agent running handle answers for one event. */
async function answer(handle: Handler): Promise<Response> {
  return new Agent(handle, [], { log: () => undefined }).handle(
    new Request("http://agent.test/", { method: "POST", body: JSON.stringify({ id: "e1", source: "crm", type: "t" }) }),
  );
}

/** The header's text: its bytes are the reference's UTF-8. */
function named(resp: Response): string | null {
  const h = resp.headers.get("Seqbox-Result-Reference");
  return h === null ? null : new TextDecoder().decode(Uint8Array.from(h, (c) => c.charCodeAt(0)));
}

test("a reference is named on a 204 and on a 200", async () => {
  let resp = await answer((ctx) => {
    ctx.resultReference = "tâche-1";
  });
  assert.equal(resp.status, 204);
  assert.equal(named(resp), "tâche-1");
  resp = await answer((ctx) => {
    ctx.resultReference = "task-2";
    return { ok: true };
  });
  assert.equal(resp.status, 200);
  assert.equal(named(resp), "task-2");
  assert.equal(named(await answer(() => undefined)), null);
});

test("an unfit reference throws where it is set", async () => {
  for (const bad of ["x".repeat(1025), "é".repeat(513), "a\u0000b", "a\nb", "\ud800", 7 as unknown as string]) {
    const resp = await answer((ctx) => {
      ctx.resultReference = bad;
    });
    assert.equal(resp.status, 500, JSON.stringify(bad).slice(0, 40));
    assert.match(((await resp.json()) as { detail: string }).detail, /RangeError/);
  }
  const ok = await answer((ctx) => {
    ctx.resultReference = "x".repeat(1024);
  });
  assert.equal(ok.status, 204, "1,024 bytes is the limit, not over it");
});

test("the gateway keeps it on the event's inbox row", async (t) => {
  const b = new Bundle(t);
  const pair = await b.start(async (ctx) => {
    ctx.resultReference = `tâche-${ctx.id}`;
  });
  await pair.gw.post(event("r1", "K", 1));
  assert.equal(await b.final(pair, "r1", "K", 2), "applied");
  const row = await pair.gw.admin("/v1/admin/inbox/crm/r1");
  assert.equal(row.result_reference, "tâche-r1");
});
