"""Each guarantee of a step or an effect against a real `seqbox serve`,
where the other suites did not check it (a hand-made mutation sweep,
docs/mutation.md): a step whose result is None memoised, a step that
raises stopping the handler, a lease renewed while a step runs, an
uncertain call reconciled with its reference or called again when the
remote side has nothing, and a request that fails over to the next
gateway URL."""

import datetime
import threading
import time

from tests import harness
from tests.test_agent_over_gateway import GatewayCase

import seqbox

# --agent-timeout 1s: an uncertain call may be reconciled a second after
# it turned so; --retry-backoff 10ms: a retried attempt runs at once. The
# agent's wait for it is bounded by --max-retry-backoff, left above the
# second (at 10ms the event came back 20 times within it, and was
# dead-lettered as a crash loop).
QUICK = ("--retry-backoff", "10ms", "--max-retry-backoff", "2s", "--agent-timeout", "1s")


def _instant(ts):
    """An RFC 3339 time of the gateway's (nanoseconds, Z) as seconds since
    the epoch."""
    head, _, frac = ts.rstrip("Z").partition(".")
    t = datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.timezone.utc).timestamp()
    return t + (float("0." + frac) if frac else 0.0)


class TestStepsRecorded(GatewayCase):
    def test_a_step_whose_result_is_none_is_memoised(self):
        # A step run for what it does (a notification) returns None, which
        # is recorded as null: the retry must take null as the result, not
        # ask again or wait for a call nobody makes.
        lock, asked, runs = threading.Lock(), [], []

        def notify():
            with lock:
                asked.append(1)

        def handle(ctx):
            ctx.step("notify", notify)
            with lock:
                runs.append(ctx.id)
                first = len(runs) == 1
            if first:
                raise seqbox.Retry("answered 503 after the step", after=0)

        gw = self.start(handle, *harness.FAST_DEAD_LETTER)
        gw.post(harness.event("n1", "K", 1))
        self.assertEqual(gw.final("n1"), "applied")
        self.assertEqual(len(asked), 1, "the step ran again")
        self.assertEqual(runs, ["n1", "n1"])
        row = gw.effects("n1")["step:notify"]
        self.assertEqual(row["state"], "succeeded", row)

    def test_a_step_that_raises_stops_the_handler_and_runs_again_on_the_retry(self):
        lock, asked, plans = threading.Lock(), [], []

        def model():
            with lock:
                asked.append(1)
                if len(asked) == 1:
                    raise TimeoutError("the model timed out")
            return "planned"

        def handle(ctx):
            plan = ctx.step("plan", model)
            with lock:
                plans.append(plan)

        gw = self.start(handle, *harness.FAST_DEAD_LETTER)
        gw.post(harness.event("f1", "K", 1))
        self.assertEqual(gw.final("f1"), "applied")
        self.assertEqual(len(asked), 2, "a failed step is not memoised")
        self.assertEqual(plans, ["planned"], "the handler went on past a step that raised")

    def test_a_step_running_longer_than_a_heartbeat_has_its_lease_renewed(self):
        # The ledger's heartbeat is 1 s and a lease not renewed for three
        # of them belongs to a dead caller: the step waits until its lease
        # moves, or until the lease it was granted has run out.
        gw_box, seen = [], {}

        def lease():
            row = gw_box[0].effects("hb1").get("step:think") or {}
            return row.get("lease_until")

        def think():
            first = harness.wait_until("the step's lease", lease)
            end = _instant(first)
            harness.wait_until("the lease renewed, or run out",
                               lambda: lease() != first or time.time() > end + 0.5)
            seen["renewed"] = lease() != first
            return "done"

        gw = self.start(lambda ctx: ctx.step("think", think))
        gw_box.append(gw)
        gw.post(harness.event("hb1", "K", 1))
        self.assertEqual(gw.final("hb1"), "applied")
        self.assertTrue(seen["renewed"], "no heartbeat renewed the step's lease while it ran")


class TestUncertainEffects(GatewayCase):
    def test_a_call_that_raised_after_applying_is_reconciled_with_its_reference(self):
        # The remote side applied the refund, then the connection reset:
        # the call is uncertain, never made again blind; reconcile finds
        # it by its key, and the ledger keeps the reference it found.
        lock, applied, refs = threading.Lock(), {}, []

        def refund(key):
            with lock:
                applied[key] = applied.get(key, 0) + 1
            raise ConnectionResetError("the connection reset after the remote side applied it")

        def find(key):
            return "refund-1" if key in applied else None

        def handle(ctx):
            refs.append(ctx.effect("refund", refund, reconcile=find))

        gw = self.start(handle, *QUICK)
        gw.post(harness.event("rc1", "K", 1))
        self.assertEqual(gw.final("rc1"), "applied")
        self.assertEqual(list(applied.values()), [1], "the call was made again blind")
        self.assertEqual(refs, ["refund-1"])
        row = gw.effects("rc1")["refund"]
        self.assertEqual((row["state"], row["ref"]), ("succeeded", "refund-1"), row)
        self.assertIsNotNone(row.get("reconciled_at"), row)

    def test_a_call_the_remote_side_never_got_is_made_again_under_its_key(self):
        lock, calls = threading.Lock(), []

        def refund(key):
            with lock:
                calls.append(key)
                if len(calls) == 1:
                    raise ConnectionResetError("the request never left")
            return "refund-2"

        refs = []

        def handle(ctx):
            refs.append(ctx.effect("refund", refund, reconcile=lambda key: None))

        gw = self.start(handle, *QUICK)
        gw.post(harness.event("rc2", "K", 1))
        self.assertEqual(gw.final("rc2"), "applied")
        self.assertEqual(len(calls), 2, "the call the remote side never got was not made")
        self.assertEqual(calls[0], calls[1], "the second call goes under the same key")
        self.assertEqual(refs, ["refund-2"])
        self.assertEqual(gw.effects("rc2")["refund"]["ref"], "refund-2")


class TestGatewayURLs(GatewayCase):
    def test_a_gateway_that_cannot_be_reached_is_passed_over_for_the_next(self):
        # Several serve processes on one database are one gateway: a URL
        # nothing answers on is passed over for the next.
        agent = seqbox.Agent(lambda ctx: ctx.step("plan", lambda: {"refund": 1}), [], log=lambda msg: None)
        server = harness.serve_in_thread(agent.serve("127.0.0.1", 0))
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        gw = harness.Serve(self.db, "http://127.0.0.1:%d/" % server.server_address[1], *harness.FAST_DEAD_LETTER)
        self.addCleanup(gw.stop)
        agent.gateways = ["http://127.0.0.1:%d" % harness.free_port(), gw.url]
        gw.post(harness.event("fo1", "K", 1))
        self.assertEqual(gw.final("fo1"), "applied")
        self.assertEqual(gw.effects("fo1")["step:plan"]["state"], "succeeded")

    def test_a_source_and_id_with_reserved_and_non_ascii_characters_reach_their_event(self):
        # Each is one path segment: '/', '?', '#', '%' and non-ASCII
        # letters percent-encoded (docs/agents.md, the endpoints).
        source, event_id = "https://crm.example/eu?region=1#frag", "order/7?x=1&y=%20 é"
        seen = {}

        def handle(ctx):
            seen["plan"] = ctx.step("plan", lambda: {"refund": 1})
            seen["ref"] = ctx.effect("refund", lambda key: "r-" + key[-4:])

        gw = self.start(handle, *harness.FAST_DEAD_LETTER)
        gw.post({"specversion": "1.0", "id": event_id, "source": source, "type": "t",
                 "partitionkey": "K", "objectversion": 1})
        self.assertEqual(gw.final(event_id, source=source), "applied")
        self.assertEqual(seen["plan"], {"refund": 1})
        rows = gw.effects(event_id, source=source)
        self.assertEqual(rows["step:plan"]["state"], "succeeded", rows)
        self.assertEqual(rows["refund"]["ref"], seen["ref"])
