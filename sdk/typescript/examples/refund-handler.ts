/**
 * The example agent's work on one event: a model plans a refund once per
 * event (a memoised step), then two tools run once each (effects): a
 * refund, when the plan has an amount, and an email.
 * @module
 */

import { type Context, type Handler, Permanent } from "../src/index.js";
import type { World } from "./worlds.js";

/** What the example agent answers for an event it applied. */
export interface RefundDone {
  /** The refund's reference ("" when the plan had none). */
  refund: string;
  /** The email's reference. */
  email: string;
}

/** The refund agent's handler over world's model and tools. */
export function refundHandler(world: World): Handler {
  return async (ctx: Context): Promise<RefundDone> => {
    const data = ctx.data as { order?: unknown } | null | undefined;
    if (typeof data !== "object" || data === null || !("order" in data)) {
      throw new Permanent("data.order is missing: nothing to refund");
    }
    const plan = await ctx.step("plan", () => world.model(ctx, "plan"));
    const about = { order: data.order, event: ctx.id, key: ctx.key };
    let refund = "";
    if (plan.refund) {
      refund = await ctx.effect("refund", (key) => world.tool("refund", key, { ...about, amount: plan.refund }), {
        reconcile: (key) => world.find("refund", key),
      });
    }
    const email = await ctx.effect("email", (key) => world.tool("email", key, { ...about, to: plan.to, refund }), {
      reconcile: (key) => world.find("email", key),
    });
    console.log(`agent: ${ctx.id} done: refund ${refund || "none"}, email ${email}`);
    return { refund, email };
  };
}
