"""seqbox agent SDK: the agent contract of `seqbox serve --agent-url`,
memoised steps and once-only effects through the gateway (docs/agents.md).

Standard library only; Python 3.10 or later.

    import seqbox

    def handle(ctx):
        plan = ctx.step("plan", lambda: model.ask(ctx.data))
        ctx.effect("refund", lambda key: payments.refund(plan, idempotency_key=key),
                   reconcile=payments.find_refund)

    seqbox.Agent(handle, "http://127.0.0.1:8080").serve("127.0.0.1", 9000).serve_forever()
"""

from .agent import Agent, Response
from .context import Context
from .errors import GatewayError, Permanent, Retry, Stale, VersionConflict, Waiting

__all__ = ["Agent", "Context", "GatewayError", "Permanent", "Response", "Retry", "Stale", "VersionConflict", "Waiting"]
