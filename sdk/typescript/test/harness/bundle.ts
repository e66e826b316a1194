/**
 * What one test of the SDK against a gateway uses: a fresh database, its
 * agents and serve processes, cleaned up when the test ends.
 * @module
 */

import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import type { Handler } from "../../src/index.js";
import { InProcessAgent, SENTINEL_TYPE } from "./agents.js";
import { event, Serve } from "./serve.js";

/** Serve flags under which a failing event is dead-lettered after two quick attempts, so that a failing test fails at once. */
export const FAST_DEAD_LETTER = ["--max-attempts", "2", "--retry-backoff", "10ms", "--max-retry-backoff", "10ms"];

/** An in-process agent and the gateway in front of it. */
export interface Pair {
  /** The agent. */
  agent: InProcessAgent;
  /** The gateway. */
  gw: Serve;
}

/** One test's database and cleanups. */
export class Bundle {
  /** The test's SQLite file. */
  readonly db: string;
  readonly #cleanups: (() => unknown)[] = [];

  /** A bundle whose cleanups run, last first, when t ends. */
  constructor(t: TestContext) {
    const dir = mkdtempSync(join(tmpdir(), "seqbox-ts-sdk-"));
    this.db = join(dir, "seqbox.db");
    this.defer(() => rmSync(dir, { recursive: true, force: true }));
    t.after(async () => {
      for (const fn of this.#cleanups.reverse()) {
        await fn();
      }
    });
  }

  /** Runs fn when the test ends. */
  defer(fn: () => unknown): void {
    this.#cleanups.push(fn);
  }

  /**
   * An in-process agent running handle, and a gateway in front of it
   * (--on-dead-letter release, so that a dead letter never holds the
   * sentinels of {@link Bundle.final}), with more serve flags.
   */
  async start(handle: Handler, ...serveArgs: string[]): Promise<Pair> {
    const agent = await InProcessAgent.start(handle);
    this.defer(() => agent.close());
    const gw = await this.serve(agent.url, ...serveArgs);
    agent.agent.gateways = [gw.url];
    return { agent, gw };
  }

  /** A gateway on the test's database in front of agentURL. */
  async serve(agentURL: string, ...args: string[]): Promise<Serve> {
    const gw = await Serve.start(this.db, agentURL, "--on-dead-letter", "release", ...args);
    this.defer(() => gw.stop());
    return gw;
  }

  /**
   * The final outcome of the event (source, id), the one before version
   * on key: a sentinel event at version reaches the agent only once the
   * earlier one's outcome is final (order per key).
   */
  async final({ agent, gw }: Pair, id: string, key: string, version: number, source = "crm"): Promise<string> {
    const sentinel = `${key}-sentinel-${version}`;
    await gw.post({ ...event(sentinel, key, version), type: SENTINEL_TYPE });
    await gw.watch(agent.reached.get(sentinel).fired);
    return gw.outcome(id, source);
  }
}

/** A loopback host:port nothing listens on now. */
export async function freeAddr(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return `127.0.0.1:${port}`;
}
