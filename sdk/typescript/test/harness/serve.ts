/**
 * A real `seqbox serve` process for the SDK's tests: the binary
 * run.ts built (SEQBOX_BIN), on a SQLite file of the test's.
 * @module
 */

import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { Signal } from "./signal.js";

/** The admin token the tests' serve processes take. */
export const ADMIN_TOKEN = "sdk-test-admin-token-0123456789";

/** A CloudEvent of the tests: source crm, on key at version, with data. */
export function event(id: string, key: string, version: number, data?: unknown): Record<string, unknown> {
  return {
    specversion: "1.0",
    id,
    source: "crm",
    type: "order.refund_requested",
    partitionkey: key,
    objectversion: version,
    ...(data === undefined ? {} : { data }),
  };
}

/** A `seqbox serve` process in front of an agent. */
export class Serve {
  /** The gateway's base URL. */
  readonly url: string;
  /** What it printed on stderr. */
  readonly lines: string[];
  /** Fires when the process exits. */
  readonly exited: Signal<number | null>;
  readonly #proc: ChildProcess;

  private constructor(proc: ChildProcess, url: string, lines: string[], exited: Signal<number | null>) {
    this.#proc = proc;
    this.url = url;
    this.lines = lines;
    this.exited = exited;
  }

  /** Starts serve on db in front of agentURL, with more flags, and waits until it listens. */
  static async start(db: string, agentURL: string, ...args: string[]): Promise<Serve> {
    const bin = process.env.SEQBOX_BIN;
    if (!bin) {
      throw new Error("SEQBOX_BIN is not set: run the tests with npm test (test/run.ts builds seqbox)");
    }
    const proc = spawn(
      bin,
      ["serve", "--db", db, "--addr", "127.0.0.1:0", "--agent-url", agentURL, "--admin-token", ADMIN_TOKEN, ...args],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    const lines: string[] = [];
    const exited = new Signal<number | null>();
    const listening = new Signal<string | null>();
    proc.on("exit", (code) => {
      exited.fire(code);
      listening.fire(null);
    });
    createInterface({ input: proc.stderr! }).on("line", (line) => {
      lines.push(line);
      const at = line.indexOf("listening on http://");
      if (at >= 0 && !listening.done) {
        listening.fire("http://" + line.slice(at + "listening on http://".length).split(/[\s"]/)[0]);
      }
    });
    const url = await listening.fired;
    if (url === null) {
      throw new Error("seqbox serve exited before listening:\n" + lines.join("\n"));
    }
    return new Serve(proc, url, lines, exited);
  }

  /** Posts events (202 once queued). */
  async post(...events: Record<string, unknown>[]): Promise<void> {
    for (const e of events) {
      const resp = await fetch(this.url + "/v1/events", {
        method: "POST",
        headers: { "Content-Type": "application/cloudevents+json" },
        body: JSON.stringify(e),
      });
      const body = await resp.text();
      if (resp.status !== 202) {
        throw new Error(`POST /v1/events: ${resp.status} ${body}`);
      }
    }
  }

  /** GETs an admin API path. */
  async admin(path: string): Promise<Record<string, unknown>> {
    const resp = await fetch(this.url + path, { headers: { Authorization: "Bearer " + ADMIN_TOKEN } });
    if (!resp.ok) {
      throw new Error(`GET ${path}: ${resp.status} ${await resp.text()}`);
    }
    return (await resp.json()) as Record<string, unknown>;
  }

  /** The inbox outcome of the event (source, id), "" without one. */
  async outcome(id: string, source = "crm"): Promise<string> {
    const q = new URLSearchParams({ source, id });
    const ids = ((await this.admin("/v1/admin/audit?" + q.toString())).identities ?? []) as { inbox_outcome: string }[];
    return ids[0]?.inbox_outcome ?? "";
  }

  /** The effects ledger rows of the event (source, id), by action (steps as step:NAME). */
  async effects(id: string, source = "crm"): Promise<Map<string, Record<string, unknown>>> {
    const rows = ((await this.admin("/v1/admin/effects?consumer=gateway")).effects ?? []) as Record<string, unknown>[];
    return new Map(rows.filter((r) => r.source === source && r.id === id).map((r) => [String(r.action), r]));
  }

  /** p, or a failure naming what serve printed if it exits first. */
  async watch<T>(p: Promise<T>): Promise<T> {
    const died = this.exited.fired.then((code) => {
      throw new Error(`seqbox serve exited (${code}):\n${this.lines.join("\n")}`);
    });
    return Promise.race([p, died]);
  }

  /** Stops it (SIGTERM) and waits for it to exit. */
  async stop(): Promise<void> {
    if (!this.exited.done) {
      this.#proc.kill("SIGTERM");
    }
    await this.exited.fired;
  }
}
