"""The agent API as the SDK reaches it: paths of any event, redirects
refused, and what the gateway answers mapped to the agent's answer."""

import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests import harness
from tests.test_agent_over_gateway import GatewayCase

import seqbox
from seqbox.errors import GatewayError
from seqbox.gateway import EventAPI


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

        gw = self.start(handle, *harness.FAST_DEAD_LETTER)
        gw.post({"specversion": "1.0", "id": "..", "source": ".", "type": "t", "partitionkey": "K", "objectversion": 1})
        self.assertEqual(gw.final("..", source="."), "applied")
        self.assertEqual(seen["plan"], {"refund": 1})
        rows = gw.effects("..", source=".")
        self.assertEqual(rows["step:plan"]["state"], "succeeded")
        self.assertEqual(rows["refund"]["state"], "succeeded")


class Canned:
    """A local HTTP server that answers every request with status,
    headers and body, and keeps what it received (path, headers)."""

    def __init__(self, test, status, body=b"", headers=None):
        self.received = []
        canned = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                size = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(size)
                canned.received.append((self.path, dict(self.headers.items())))
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST

            def log_message(self, *args):
                pass

        self.server = harness.serve_in_thread(ThreadingHTTPServer(("127.0.0.1", 0), Handler))
        test.addCleanup(self.server.server_close)
        test.addCleanup(self.server.shutdown)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]


class TestRedirects(unittest.TestCase):
    def test_a_redirect_is_refused_and_its_target_never_contacted(self):
        """The token opens the event's steps and effects: it goes to the
        gateway's URL and nowhere else (DESIGN.md: redirects are never
        followed)."""
        elsewhere = Canned(self, 200, b'{"state":"succeeded","result":1}', {"Content-Type": "application/json"})
        for status in (301, 302, 307, 308):
            gateway = Canned(self, status, b"", {"Location": elsewhere.url + "/v1/events/crm/e1/steps/plan"})
            with self.assertRaises(GatewayError) as e:
                EventAPI([gateway.url], "crm", "e1", "v1.secret-token").call("step", "plan", {"op": "begin"})
            self.assertEqual(e.exception.status, status)
            self.assertIn(str(status), str(e.exception))
            self.assertIn(elsewhere.url, str(e.exception), "the error names the Location")
            self.assertEqual(len(gateway.received), 1)
        self.assertEqual(elsewhere.received, [], "the redirect's target was contacted")


class TestUnexpectedAnswers(unittest.TestCase):
    def call(self, status, body, content_type="application/json"):
        gateway = Canned(self, status, body, {"Content-Type": content_type})
        with self.assertRaises(GatewayError) as e:
            EventAPI([gateway.url], "crm", "e1", "v1.token").call("step", "plan", {"op": "begin"})
        return str(e.exception)

    def test_an_answer_that_is_not_a_row_is_a_gateway_error_naming_the_problem(self):
        self.assertIn("not JSON", self.call(200, b"<html><body>proxy login</body></html>", "text/html"))
        self.assertIn("state", self.call(200, b'{"granted":true}'))
        self.assertIn("state", self.call(200, b'{"state":"sleeping"}'))
        self.assertIn("call", self.call(200, b'{"state":"pending","granted":true}'))
        self.assertIn("not a JSON object", self.call(200, b'[1]'))

    def test_the_handler_answers_503_for_it(self):
        gateway = Canned(self, 200, b"<html></html>", {"Content-Type": "text/html"})
        resp = seqbox.Agent(lambda ctx: ctx.step("plan", lambda: 1), [gateway.url], log=lambda m: None).handle(
            "POST", {"Seqbox-Effects-Token": "v1.token"}, b'{"id":"e1","source":"crm","type":"t"}')
        self.assertEqual(resp.status, 503, resp.body)


class TestGatewayURLs(unittest.TestCase):
    def test_a_gateway_url_that_is_not_one_is_refused_at_once(self):
        for bad in ("127.0.0.1:8080", "ftp://gw", "http://", "http://gw/?q=1", "http://gw/#f", ""):
            with self.assertRaises(ValueError, msg=bad):
                seqbox.Agent(lambda ctx: None, bad)
            with self.assertRaises(ValueError, msg=bad):
                seqbox.Agent(lambda ctx: None, ["http://127.0.0.1:8080", bad])
            agent = seqbox.Agent(lambda ctx: None, [])
            with self.assertRaises(ValueError, msg=bad):
                agent.gateways = [bad]
        ok = seqbox.Agent(lambda ctx: None, ["http://127.0.0.1:8080/", "https://gw.example/prefix"])
        self.assertEqual(ok.gateways, ["http://127.0.0.1:8080/", "https://gw.example/prefix"])
