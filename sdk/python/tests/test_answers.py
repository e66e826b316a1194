"""What Agent.handle answers for what a handler returns or raises, when
that cannot be said as it is: a 500 problem (JSON), never an exception
out of handle or a body that is not JSON."""

import json
import math
import unittest

import seqbox

EVENT = b'{"id":"e1","source":"crm","type":"t"}'


def answer(handler):
    return seqbox.Agent(handler, [], log=lambda msg: None).handle("POST", {}, EVENT)


class TestUnsayable(unittest.TestCase):
    def assertProblem500(self, resp, what):
        self.assertEqual(resp.status, 500, (what, resp.body))
        self.assertEqual(resp.headers.get("Content-Type"), "application/problem+json", what)
        problem = json.loads(resp.body)
        self.assertEqual(problem["status"], 500)
        return problem

    def test_a_result_json_cannot_hold_is_a_500_problem(self):
        circular = {}
        circular["self"] = circular
        for what, value in (("a set", {1, 2}), ("a cycle", circular), ("NaN", math.nan),
                            ("Infinity in a list", [math.inf])):
            self.assertProblem500(answer(lambda ctx: value), what)

    def test_retry_after_must_be_finite_and_not_negative(self):
        for after in (math.nan, math.inf, -math.inf, -1, "5", True, None):
            with self.assertRaises(ValueError, msg=after):
                seqbox.Retry("later", after=after)

            def handler(ctx, after=after):
                raise seqbox.Retry("later", after=after)

            problem = self.assertProblem500(answer(handler), after)
            self.assertIn("after", problem["detail"])
        self.assertEqual(answer(lambda ctx: (_ for _ in ()).throw(seqbox.Retry("x", after=0))).headers["Retry-After"], "1")


class TestAnswers(unittest.TestCase):
    def raising(self, exc):
        def handler(ctx):
            raise exc
        return answer(handler)

    def test_retry_after_is_rounded_up_to_whole_seconds(self):
        self.assertEqual(self.raising(seqbox.Retry("busy", after=2.5)).headers["Retry-After"], "3")
        self.assertEqual(self.raising(seqbox.Retry("busy", after=2)).headers["Retry-After"], "2")

    def test_stale_and_version_conflict_are_409_with_their_outcome(self):
        for exc, outcome in ((seqbox.Stale("v4 is applied"), "stale"), (seqbox.VersionConflict(), "version_conflict")):
            resp = self.raising(exc)
            self.assertEqual(resp.status, 409, outcome)
            self.assertEqual(json.loads(resp.body)["outcome"], outcome)

    def test_a_wait_is_503_with_an_agent_waits_problem_naming_the_call(self):
        for kind in ("step", "effect"):
            resp = self.raising(seqbox.Waiting(kind, "plan", 1.2))
            self.assertEqual(resp.status, 503, kind)
            self.assertEqual(resp.headers["Retry-After"], "2", kind)
            problem = json.loads(resp.body)
            self.assertEqual(problem["type"], "https://github.com/seqbox/seqbox/blob/main/docs/problems.md#agent-waits")
            self.assertEqual(problem[kind], "plan", problem)


class TestAgentArguments(unittest.TestCase):
    def test_a_timeout_that_is_no_positive_number_is_refused_at_once(self):
        # Before, -1 or NaN was taken, and each call of the agent API
        # then failed inside urllib: every event answered 503, forever.
        for timeout in (-1, 0, math.nan, math.inf, "5", True, None):
            with self.assertRaises(ValueError, msg=timeout) as caught:
                seqbox.Agent(lambda ctx: None, [], timeout=timeout)
            self.assertIn("timeout", str(caught.exception))
        self.assertEqual(seqbox.Agent(lambda ctx: None, [], timeout=2).timeout, 2.0)

    def test_a_call_with_no_gateway_says_the_agent_has_none(self):
        # Before: "no gateway answered: None".
        from seqbox.gateway import EventAPI
        with self.assertRaises(seqbox.GatewayError) as caught:
            EventAPI([], "crm", "e1", "token").call("step", "draft", {"op": "begin"})
        self.assertIn("no gateway to call", str(caught.exception))

    def test_a_handler_that_is_no_function_is_refused_at_once(self):
        with self.assertRaises(TypeError) as caught:
            seqbox.Agent(None, [])
        self.assertIn("handler", str(caught.exception))


class TestServe(unittest.TestCase):
    def test_a_chunked_body_is_read(self):
        import http.client
        from tests import harness
        seen = []
        server = harness.serve_in_thread(seqbox.Agent(lambda ctx: seen.append(ctx.id), []).serve("127.0.0.1", 0))
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
        self.addCleanup(conn.close)
        chunks = [b'{"id":"ch', b'1","source":"crm",', b'"type":"t"}']
        conn.request("POST", "/", body=iter(chunks), headers={"Content-Type": "application/cloudevents+json"})
        resp = conn.getresponse()
        self.assertEqual((resp.status, resp.read()), (204, b""))
        self.assertEqual(seen, ["ch1"])
        # The connection is still good for the next request.
        conn.request("POST", "/", body=iter([b'{"id":"ch2","source":"crm","type":"t"}']))
        self.assertEqual(conn.getresponse().status, 204)
        self.assertEqual(seen, ["ch1", "ch2"])

    def test_a_wsgi_body_the_server_terminated_is_read(self):
        import io
        seen = []
        app = seqbox.Agent(lambda ctx: seen.append(ctx.id), []).wsgi
        statuses = []
        environ = {"REQUEST_METHOD": "POST", "wsgi.input": io.BytesIO(b'{"id":"wt1","source":"crm","type":"t"}'),
                   "wsgi.input_terminated": True}
        app(environ, lambda status, headers: statuses.append(status))
        self.assertEqual((statuses, seen), (["204 No Content"], ["wt1"]))


class TestNames(unittest.TestCase):
    def test_waiting_names_its_call_as_the_typescript_sdk_does(self):
        w = seqbox.Waiting("step", "plan", 1.5)
        self.assertEqual((w.kind, w.call_name, w.name, w.after), ("step", "plan", "plan", 1.5))


class TestDeepBodies(unittest.TestCase):
    def test_an_event_nested_deeper_than_the_decoder_reads_is_a_400_problem(self):
        # The gateway takes such an event; Python's json stops near 1,000
        # levels with a RecursionError, which escaped handle: http.server
        # dropped the connection and the gateway's call was left uncertain.
        deep = b'{"id":"e1","source":"crm","type":"t","data":' + b"[" * 5000 + b"]" * 5000 + b"}"
        resp = seqbox.Agent(lambda ctx: None, [], log=lambda msg: None).handle("POST", {}, deep)
        self.assertEqual(resp.status, 400, resp.body)
        problem = json.loads(resp.body)
        self.assertIn("nests deeper", problem["detail"])
