/** What the gateway bounds (an effect's ref and a call's error at 4096 bytes, docs/agents.md), cut by the SDK to fit, at a character boundary. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { Permanent, Retry } from "../src/index.js";
import { Bundle, FAST_DEAD_LETTER } from "./harness/bundle.js";
import { event } from "./harness/serve.js";

const LIMIT = 4096;
const bytes = (s: string): number => Buffer.byteLength(s, "utf8");

test("a long non-ASCII refusal of an effect is recorded failed", async (t) => {
  const b = new Bundle(t);
  const reason = "отказ ".repeat(1000); // 11,000 bytes
  const pair = await b.start(async (ctx) => {
    await ctx.effect("refund", () => {
      throw new Permanent(reason);
    });
  }, ...FAST_DEAD_LETTER);
  await pair.gw.post(event("lt1", "K", 1));
  assert.equal(await b.final(pair, "lt1", "K", 2), "dead_lettered");
  const row = (await pair.gw.effects("lt1")).get("refund")!;
  assert.equal(row.state, "failed", JSON.stringify(row).slice(0, 300));
  const err = String(row.last_error);
  assert.ok(bytes(err) <= LIMIT && bytes(err) > LIMIT - 4, `cut at the limit: ${bytes(err)} bytes`);
  assert.ok(`Permanent: ${reason}`.startsWith(err));
});

test("a long non-ASCII ref is recorded cut and returned as recorded", async (t) => {
  const b = new Bundle(t);
  const refs: string[] = [];
  const pair = await b.start(async (ctx) => {
    refs.push(await ctx.effect("refund", () => "ключ".repeat(2000)));
    if (refs.length === 1) {
      throw new Retry("again", { after: 0 });
    }
  }, ...FAST_DEAD_LETTER);
  await pair.gw.post(event("lt2", "K", 1));
  assert.equal(await b.final(pair, "lt2", "K", 2), "applied");
  const row = (await pair.gw.effects("lt2")).get("refund")!;
  assert.equal(row.state, "succeeded");
  assert.deepEqual(refs, [row.ref, row.ref], "the call's ref is the one recorded, every time");
  assert.equal(bytes(String(row.ref)), LIMIT);
  assert.ok("ключ".repeat(2000).startsWith(String(row.ref)));
});
