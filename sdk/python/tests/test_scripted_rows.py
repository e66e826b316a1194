"""What the SDK makes of ledger rows a real gateway gives only in a race
or a hang, scripted by a local server that answers each op of the agent
API with a row (or not at all): a call another caller runs, an uncertain
call that may still be running after a reconcile, a gateway that does
not answer."""

import json
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests import harness

import seqbox

EVENT = b'{"id":"e1","source":"crm","type":"t"}'
HEADERS = {"Seqbox-Effects-Token": "v1.token"}
WAITS = "https://github.com/seqbox/seqbox/blob/main/docs/problems.md#agent-waits"


class Scripted:
    """A local HTTP server that answers each op (begin, reconcile, ...)
    with the row rows[op] as 200 JSON, and keeps the ops it received in
    order. With hang set, it answers nothing until the test ends."""

    def __init__(self, test, rows, hang=False):
        self.ops = []
        released = threading.Event()
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                scripted.ops.append(body.get("op"))
                if hang:
                    released.wait()
                    return
                raw = json.dumps(rows[body.get("op")]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.server = harness.serve_in_thread(ThreadingHTTPServer(("127.0.0.1", 0), Handler))
        test.addCleanup(self.server.server_close)
        test.addCleanup(self.server.shutdown)
        test.addCleanup(released.set)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]


def answer(handler, url, timeout=10.0):
    resp = seqbox.Agent(handler, [url], timeout=timeout, log=lambda msg: None).handle("POST", HEADERS, EVENT)
    return resp.status, json.loads(resp.body), resp.headers


class TestWaits(unittest.TestCase):
    def test_a_step_another_caller_runs_is_a_wait_of_its_retry_after(self):
        gw = Scripted(self, {"begin": {"kind": "step", "name": "plan", "state": "pending", "granted": False,
                                       "call": 1, "idempotency_key": "sbx-1", "heartbeat_ms": 1000,
                                       "retry_after_ms": 1500}})
        asked = []
        status, problem, headers = answer(lambda ctx: ctx.step("plan", lambda: asked.append(1)), gw.url)
        self.assertEqual(status, 503, problem)
        self.assertEqual(headers["Retry-After"], "2", "retry_after_ms is milliseconds: 1.5 s, rounded up")
        self.assertEqual((problem["type"], problem.get("step")), (WAITS, "plan"), problem)
        self.assertEqual(asked, [], "the model was asked while another caller runs the step")

    def test_an_uncertain_call_that_may_still_run_after_a_reconcile_is_a_wait_not_a_success(self):
        row = {"kind": "effect", "name": "refund", "state": "uncertain", "granted": False, "call": 1,
               "idempotency_key": "sbx-1", "heartbeat_ms": 1000}
        gw = Scripted(self, {"begin": row, "reconcile": {**row, "retry_after_ms": 2000}})
        called, done = [], []

        def handler(ctx):
            done.append(ctx.effect("refund", lambda key: called.append(key), reconcile=lambda key: None))

        status, problem, headers = answer(handler, gw.url)
        self.assertEqual(status, 503, problem)
        self.assertEqual((problem["type"], problem.get("effect")), (WAITS, "refund"), problem)
        self.assertEqual(headers["Retry-After"], "2")
        self.assertEqual((called, done), ([], []), "the effect was taken as made, or made again blind")
        self.assertEqual(gw.ops, ["begin", "reconcile"])


class TestTimeout(unittest.TestCase):
    def test_a_gateway_that_does_not_answer_is_given_up_after_the_timeout(self):
        gw = Scripted(self, {}, hang=True)
        out = []
        t = threading.Thread(target=lambda: out.append(answer(lambda ctx: ctx.step("plan", lambda: 1), gw.url,
                                                              timeout=0.2)), daemon=True)
        t.start()
        t.join(30)  # bounds a failure only: the answer comes after 0.2 s
        self.assertFalse(t.is_alive(), "the agent API's request was not given up after its timeout")
        status, problem, headers = out[0]
        self.assertEqual(status, 503, problem)
        self.assertIn("Retry-After", headers)


if __name__ == "__main__":
    unittest.main()
