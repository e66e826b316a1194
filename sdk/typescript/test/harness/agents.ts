/**
 * The agents the tests put behind a gateway: one in the test's process
 * around a handler, or the example agent as its own process.
 * @module
 */

import { type ChildProcess, spawn } from "node:child_process";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Agent, type Context, type Handler } from "../../src/index.js";
import { Signal, Signals } from "./signal.js";

/** The type of the events {@link InProcessAgent} answers 204 to without its handler (a test's sentinels). */
export const SENTINEL_TYPE = "test.sentinel";

/** An agent in the test's process, around a handler, on a free loopback port. */
export class InProcessAgent {
  /** The agent. */
  readonly agent: Agent;
  /** The agent's base URL. */
  readonly url: string;
  /** Fire when an event (by id) reaches the agent. */
  readonly reached: Signals<Context>;
  readonly #server: Server;

  private constructor(agent: Agent, server: Server, reached: Signals<Context>) {
    this.agent = agent;
    this.#server = server;
    this.reached = reached;
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  }

  /** Starts an agent running handle (sentinels aside); its gateways are set once the gateway runs. */
  static async start(handle: Handler): Promise<InProcessAgent> {
    const reached = new Signals<Context>();
    const agent = new Agent(
      (ctx) => {
        reached.get(ctx.id).fire(ctx);
        return ctx.type === SENTINEL_TYPE ? undefined : handle(ctx);
      },
      [],
      { log: () => undefined },
    );
    return new InProcessAgent(agent, await agent.serve("127.0.0.1", 0), reached);
  }

  /** Stops listening and drops its connections. */
  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}

/** The example agent's script, built by tsc. */
export const EXAMPLE = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "examples", "refund-agent.js");

/** The example agent (examples/refund-agent.ts) as its own process. */
export class AgentProcess {
  /** What it printed, line by line. */
  readonly lines: string[] = [];
  /** Fires when it exits. */
  readonly exited = new Signal<void>();
  readonly #proc: ChildProcess;
  readonly #waits: { text: string; signal: Signal<string> }[] = [];

  private constructor(proc: ChildProcess) {
    this.#proc = proc;
    proc.on("exit", () => this.exited.fire());
    createInterface({ input: proc.stdout! }).on("line", (line) => {
      this.lines.push(line);
      for (const w of this.#waits) {
        if (line.includes(w.text)) {
          w.signal.fire(line);
        }
      }
    });
  }

  /** Starts the example on listen (host:port) with gateways and remote, and waits until it listens. */
  static async start(listen: string, gateways: string, remote: string): Promise<AgentProcess> {
    const proc = spawn(process.execPath, [EXAMPLE, listen, gateways, remote], { stdio: ["ignore", "pipe", "inherit"] });
    const p = new AgentProcess(proc);
    const up = await Promise.race([p.printed("listening on http://"), p.exited.fired.then(() => null)]);
    if (up === null) {
      throw new Error("the example agent exited before listening:\n" + p.lines.join("\n"));
    }
    return p;
  }

  /** Resolves with the first line that contains text, printed before or after. */
  printed(text: string): Promise<string> {
    const line = this.lines.find((l) => l.includes(text));
    if (line !== undefined) {
      return Promise.resolve(line);
    }
    const signal = new Signal<string>();
    this.#waits.push({ text, signal });
    return signal.fired;
  }

  /** SIGKILLs it and waits for it to exit. */
  async kill(): Promise<void> {
    this.#proc.kill("SIGKILL");
    await this.exited.fired;
  }
}
