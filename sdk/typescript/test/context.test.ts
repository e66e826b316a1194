/** What the handler's context holds: the event's attributes and the gateway's headers, decoded as the gateway wrote them. */

import assert from "node:assert/strict";
import { test } from "node:test";
import { Agent } from "../src/index.js";
import { Bundle } from "./harness/bundle.js";

const KEYS = ["キー", "ключ"];

/** An event of key at version 1. */
function keyEvent(id: string, key: string): Record<string, unknown> {
  return { specversion: "1.0", id, source: "crm", type: "t", partitionkey: key, objectversion: 1 };
}

test("a non-ASCII key reaches the handler as it was sent", async (t) => {
  const b = new Bundle(t);
  const keys = new Map<string, string | null>();
  const pair = await b.start((ctx) => {
    keys.set(ctx.id, ctx.key);
  });
  await pair.gw.post(...KEYS.map((k, i) => keyEvent(`nk${i}`, k)));
  for (const [i, k] of KEYS.entries()) {
    assert.equal(await b.final(pair, `nk${i}`, k, 2), "applied");
  }
  assert.deepEqual(
    KEYS.map((_, i) => keys.get(`nk${i}`)),
    KEYS,
  );
});

test("the partition key header alone is decoded as UTF-8", async () => {
  // An event without partitionkey in its body: the header's bytes, which
  // Node's http hands over as Latin-1, are UTF-8.
  const seen: (string | null)[] = [];
  const agent = new Agent((ctx) => {
    seen.push(ctx.key);
  }, []);
  for (const k of [...KEYS, "plain"]) {
    const latin1 = Buffer.from(k, "utf8").toString("latin1");
    await agent.handle(
      new Request("http://agent.test/", {
        method: "POST",
        headers: { "Seqbox-Partition-Key": latin1 },
        body: JSON.stringify({ id: "h", source: "s", type: "t" }),
      }),
    );
  }
  assert.deepEqual(seen, [...KEYS, "plain"]);
});
