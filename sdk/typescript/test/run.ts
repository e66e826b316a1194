/**
 * `npm test`'s runner: builds seqbox from this checkout once (unless
 * SEQBOX_BIN names a binary), then runs the node:test files with
 * SEQBOX_BIN set, so every file's serve processes are the same binary.
 * @module
 */

import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
/** The checkout's root: dist/test is four levels under it. */
const root = join(here, "..", "..", "..", "..");

let bin = process.env.SEQBOX_BIN;
if (!bin) {
  bin = join(mkdtempSync(join(tmpdir(), "seqbox-ts-bin-")), "seqbox");
  const build = spawnSync("go", ["build", "-o", bin, "./cmd/seqbox"], { cwd: root, stdio: "inherit" });
  if (build.error || build.status !== 0) {
    console.error(`go build ./cmd/seqbox failed (the SDK's tests need go on PATH, or SEQBOX_BIN): ${build.error?.message ?? `exit ${build.status}`}`);
    process.exit(1);
  }
}
const files = readdirSync(here)
  .filter((f) => f.endsWith(".test.js"))
  .map((f) => join(here, f));
const run = spawnSync(process.execPath, ["--test", ...process.argv.slice(2), ...files], {
  stdio: "inherit",
  env: { ...process.env, SEQBOX_BIN: bin },
});
process.exit(run.status ?? 1);
