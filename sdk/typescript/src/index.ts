/**
 * seqbox agent SDK: the agent contract of `seqbox serve --agent-url`,
 * memoised steps and once-only effects through the gateway
 * (docs/agents.md). No runtime dependencies; Node 20 or later, or any
 * runtime with the Fetch API.
 *
 * ```ts
 * import { Agent } from "seqbox";
 *
 * const agent = new Agent(async (ctx) => {
 *   const plan = await ctx.step("plan", () => model.ask(ctx.data));
 *   await ctx.effect("refund", (key) => payments.refund(plan, key), { reconcile: payments.find });
 * }, "http://127.0.0.1:8080");
 * await agent.serve("127.0.0.1", 9000);
 * ```
 * @module
 */

export { Agent, type AgentOptions, type Handler } from "./agent.js";
export { type CloudEvent, Context, type EffectOptions } from "./context.js";
export { GatewayError, Permanent, Retry, type RetryOptions, Stale, VersionConflict, Waiting } from "./errors.js";
export { type FetchHandler, toNodeListener } from "./node.js";
