"""The SDK against a real `seqbox serve` (SQLite): steps memoised, tool
calls made once, an uncertain call reconciled, the token refused
elsewhere, and order per key kept while a step is leased."""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

from tests import harness

import seqbox
from seqbox.errors import GatewayError
from seqbox.gateway import EventAPI


class GatewayCase(unittest.TestCase):
    """A fresh database, a remote side and helpers for one test."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="seqbox-sdk-")
        self.db = os.path.join(self.dir, "seqbox.db")

    def start(self, handle, *serve_args):
        """An in-process agent running handle, and a gateway in front of it."""
        agent = seqbox.Agent(handle, [], log=lambda msg: None)
        server = harness.serve_in_thread(agent.serve("127.0.0.1", 0))
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        gw = harness.Serve(self.db, "http://127.0.0.1:%d/" % server.server_address[1], *serve_args)
        self.addCleanup(gw.stop)
        agent.gateways = [gw.url]
        return gw


class TestSteps(GatewayCase):
    def test_step_memoised_across_a_retried_event(self):
        lock, asked, plans = threading.Lock(), [], []

        def model():
            with lock:
                asked.append(1)
                return {"refund": 20, "answer": len(asked)}

        def handle(ctx):
            plan = ctx.step("plan", model)
            with lock:
                plans.append(plan)
                first = len(plans) == 1
            if first:
                raise seqbox.Retry("the agent's database hiccupped after the model answered", after=0)

        gw = self.start(handle)
        gw.post(harness.event("s1", "K", 1, {"order": "o-1"}))
        gw.wait_outcome("s1")
        self.assertEqual(len(asked), 1, "the model is asked once")
        self.assertEqual(plans, [{"refund": 20, "answer": 1}] * 2)


class TestEffects(GatewayCase):
    def test_tool_call_once_when_the_agent_answers_503_after_calling_it(self):
        remote = harness.Remote()
        self.addCleanup(remote.close)
        world = None
        lock, refs = threading.Lock(), []

        def handle(ctx):
            ref = ctx.effect("refund", lambda key: world.tool("refund", key, {"order": ctx.data["order"]}),
                             reconcile=lambda key: world.find("refund", key))
            with lock:
                refs.append(ref)
                if len(refs) == 1:
                    raise seqbox.Retry("answered 503 after the refund", after=0)

        sys.path.insert(0, os.path.join(harness.SDK, "examples"))
        import refund_agent
        world = refund_agent.RemoteWorld(remote.url)
        gw = self.start(handle)
        gw.post(harness.event("t1", "K", 1, {"order": "o-1"}))
        gw.wait_outcome("t1")
        self.assertEqual(list(remote.tool_calls.values()), [1], "one refund")
        self.assertEqual(refs[0], refs[1], "the retry gets the recorded reference")

    def test_uncertain_call_reconciled(self):
        """The example agent, its own process, is SIGKILLed right after
        the remote side applied its refund and before it could record it.
        The restarted agent finds the call uncertain, reconciles it by its
        idempotency key and never refunds twice."""
        port = harness.free_port()
        killed = threading.Event()
        procs = []

        def kill_after_first_refund(action, key):
            if action == "refund" and not killed.is_set():
                procs[-1].send_signal(signal.SIGKILL)
                procs[-1].wait()
                killed.set()

        remote = harness.Remote(on_tool=kill_after_first_refund)
        self.addCleanup(remote.close)
        gw_url = []

        def agent_proc():
            p = subprocess.Popen([sys.executable, os.path.join(harness.SDK, "examples", "refund_agent.py"),
                                  "127.0.0.1:%d" % port, gw_url[0], remote.url],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.assertIn("listening", p.stdout.readline())
            procs.append(p)
            self.addCleanup(lambda: (p.poll() is None and p.kill(), p.wait(), p.stdout.close()))

        # The gateway's URL is the agent's argument: reserve it first.
        gw = harness.Serve(self.db, "http://127.0.0.1:%d/" % port, "--agent-timeout", "3s")
        self.addCleanup(gw.stop)
        gw_url.append(gw.url)
        agent_proc()
        gw.post(harness.event("u1", "K", 1, {"order": "o-1", "amount": 20}))
        killed.wait()
        agent_proc()
        gw.wait_outcome("u1")
        refunds = {k: n for (a, k), n in remote.tool_calls.items() if a == "refund"}
        self.assertEqual(list(refunds.values()), [1], "never re-run blind")
        self.assertEqual(sum(remote.model_calls.values()), 1, "the plan was recorded before the kill")
        rows = {e["action"]: e for e in gw.admin("/v1/admin/effects?consumer=gateway")["effects"]}
        self.assertEqual(rows["refund"]["state"], "succeeded")
        self.assertIsNotNone(rows["refund"].get("reconciled_at"), rows["refund"])
        self.assertEqual(rows["step:plan"]["state"], "succeeded")


class TestToken(GatewayCase):
    def test_token_refused_for_another_event_after_the_outcome_and_without_it(self):
        tokens, second = {}, threading.Event()

        def handle(ctx):
            ctx.step("plan", lambda: 1)
            tokens[ctx.id] = ctx.token
            if ctx.id == "a2":
                second.set()

        gw = self.start(handle)
        gw.post(harness.event("a1", "K", 1))
        gw.post(harness.event("a2", "K", 2))
        second.wait()  # a2 reaches the agent only once a1's outcome is final

        def status(token, event_id):
            with self.assertRaises(GatewayError) as e:
                EventAPI([gw.url], "crm", event_id, token).call("effect", "refund", {"op": "begin"})
            return e.exception.status, e.exception.problem["type"].rsplit("#", 1)[-1]

        gw.wait_outcome("a1")
        self.assertEqual(status(tokens["a1"], "a1"), (410, "event-final"))
        self.assertEqual(status(tokens["a1"], "a3"), (403, "forbidden"))
        self.assertEqual(status(tokens["a2"][:-2] + "xx", "a2"), (403, "forbidden"))
        self.assertEqual(status("", "a2"), (401, "unauthorized"))


class TestOrder(GatewayCase):
    def test_order_per_key_kept_while_a_step_is_leased(self):
        leased, release, other = threading.Event(), threading.Event(), threading.Event()
        seen = []

        def think():
            leased.set()
            release.wait()
            return "done"

        def handle(ctx):
            seen.append(ctx.id)
            if ctx.id == "k1":
                ctx.step("think", think)
            if ctx.id == "l1":
                other.set()

        gw = self.start(handle)
        gw.post(harness.event("k1", "K", 1))
        leased.wait()
        gw.post(harness.event("k2", "K", 2))
        gw.post(harness.event("l1", "L", 1))
        other.wait()
        self.assertNotIn("k2", seen, "k2 reached the agent while k1's step was leased")
        release.set()
        gw.wait_outcome("k2")
        self.assertLess(seen.index("k1"), seen.index("k2"))


class TestWSGI(GatewayCase):
    def test_the_wsgi_example_applies_an_event(self):
        from wsgiref.simple_server import make_server
        sys.path.insert(0, os.path.join(harness.SDK, "examples"))
        import wsgi_agent
        remote = harness.Remote()
        self.addCleanup(remote.close)
        port = harness.free_port()
        gw = harness.Serve(self.db, "http://127.0.0.1:%d/" % port)
        self.addCleanup(gw.stop)
        server = make_server("127.0.0.1", port, wsgi_agent.application(gw.url, remote.url),
                             handler_class=wsgi_agent.QuietHandler)
        harness.serve_in_thread(server)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        gw.post(harness.event("w1", "K", 1, {"order": "o-9", "amount": 5}))
        gw.wait_outcome("w1")
        self.assertEqual(sorted(a for a, _ in remote.tool_calls), ["email", "refund"])


if __name__ == "__main__":
    unittest.main()
