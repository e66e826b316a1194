"""A step that runs longer than the gateway's agent timeout is waited for:
each wait is a delivery of its event, and none counts toward the
crash-loop bound (4 x --max-attempts deliveries without an outcome).
They were counted: the event was dead-lettered, "delivered 9 times without
settling (a crash loop?)", while its step still ran (docs/design.md §8,
"A wait for a call or a decision running elsewhere")."""
import threading
from tests import harness
from tests.test_agent_over_gateway import GatewayCase


class TestWaitsAreNoCrashLoop(GatewayCase):
    def test_a_live_step_waited_for_past_the_crash_loop_bound_applies(self):
        lock, reached = threading.Lock(), []
        gw_box = []

        def think():
            # Holds the step (its lease renewed) until the gateway has come
            # back 12 times (the bound is 8), or the event has an outcome.
            harness.wait_until("12 deliveries, or an outcome",
                               lambda: len(reached) >= 12 or gw_box[0].outcome("w1"))
            return "thought"

        def handle(ctx):
            with lock:
                reached.append(1)
            ctx.step("think", think)

        gw = self.start(handle, "--agent-timeout", "1s", "--max-attempts", "2",
                        "--retry-backoff", "10ms", "--max-retry-backoff", "100ms")
        gw_box.append(gw)
        gw.post(harness.event("w1", "K", 1))
        self.assertEqual(gw.final("w1"), "applied")
        self.assertGreaterEqual(len(reached), 12, "the gateway came back past the bound")
