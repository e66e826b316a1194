"""The agent API as the SDK reaches it: paths of any event, redirects
refused, and what the gateway answers mapped to the agent's answer."""

import threading

from tests import harness
from tests.test_agent_over_gateway import GatewayCase

import seqbox

# A failing event is dead-lettered after two quick attempts, so that a
# test that fails does so at once.
FAST_DEAD_LETTER = ("--max-attempts", "2", "--retry-backoff", "10ms", "--max-retry-backoff", "10ms")


class TestDotSegments(GatewayCase):
    def test_an_event_whose_source_and_id_are_dot_segments_runs_a_step_and_an_effect(self):
        """`.` and `..` are path segments a client or the router would
        resolve away: the SDK sends them as %2E."""
        done = threading.Event()
        seen = {}

        def handle(ctx):
            seen["plan"] = ctx.step("plan", lambda: {"refund": 1})
            seen["ref"] = ctx.effect("refund", lambda key: "r-" + key[-4:])
            done.set()

        gw = self.start(handle, *FAST_DEAD_LETTER)
        gw.post({"specversion": "1.0", "id": "..", "source": ".", "type": "t", "partitionkey": "K", "objectversion": 1})
        self.assertEqual(harness.wait_until(". ..'s outcome", lambda: gw.outcome("..", source=".")), "applied")
        self.assertEqual(seen["plan"], {"refund": 1})
        rows = {e["action"]: e for e in gw.admin("/v1/admin/effects?consumer=gateway")["effects"]
                if e["source"] == "." and e["id"] == ".."}
        self.assertEqual(rows["step:plan"]["state"], "succeeded")
        self.assertEqual(rows["refund"]["state"], "succeeded")
