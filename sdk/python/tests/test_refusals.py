"""A definite refusal that concerns one event (the gateway's 400, 404,
405, 413, or one the SDK finds before sending) ends that event, answered
422 like Permanent: it is not retried, the model is not asked again, and
the agent's circuit does not count it. A gateway that is down (5xx, no
connection) is still a retry."""

import json
import math
import unittest

from tests import harness
from tests.test_agent_over_gateway import GatewayCase
from tests.test_event_api import Canned

import seqbox

EVENT = b'{"id":"e1","source":"crm","type":"t"}'
HEADERS = {"Seqbox-Effects-Token": "v1.token"}


class TestGatewayRefusals(unittest.TestCase):
    def answer(self, status, problem):
        gateway = Canned(self, status, json.dumps(problem).encode(), {"Content-Type": "application/problem+json"})
        agent = seqbox.Agent(lambda ctx: ctx.step("plan", lambda: 1), [gateway.url], log=lambda msg: None)
        resp = agent.handle("POST", HEADERS, EVENT)
        return resp.status, json.loads(resp.body), resp.headers

    def test_a_refusal_about_the_event_is_permanent_with_the_gateways_detail(self):
        for status, detail in ((400, "the body is not the JSON object expected"), (404, "no such path"),
                               (405, "method not allowed"), (413, "a step's result is at most 262144 bytes of JSON")):
            got, problem, headers = self.answer(status, {"status": status, "detail": detail})
            self.assertEqual(got, 422, (status, problem))
            self.assertIn(str(status), problem["detail"])
            self.assertIn(detail, problem["detail"])
            self.assertNotIn("Retry-After", headers)

    def test_another_events_token_is_permanent(self):
        # 403: the token is another event's (or forged); a retry carries
        # the same token and meets the same refusal.
        got, problem, headers = self.answer(403, {"status": 403, "detail": "the token is not this event's"})
        self.assertEqual(got, 422, problem)
        self.assertIn("not this event's", problem["detail"])
        self.assertNotIn("Retry-After", headers)

    def test_a_conflict_or_an_event_not_being_dispatched_is_a_retry(self):
        # 409 (a record after someone else settled the row) and 410 (the
        # event is not being dispatched now) are answered 503: docs/agents.md.
        for status in (409, 410):
            got, problem, headers = self.answer(status, {"status": status, "detail": "not now"})
            self.assertEqual(got, 503, (status, problem))
            self.assertIn("Retry-After", headers)

    def test_a_gateway_that_is_down_is_still_a_retry(self):
        for status in (500, 502, 503):
            got, _, headers = self.answer(status, {"detail": "down"})
            self.assertEqual(got, 503, status)
            self.assertIn("Retry-After", headers)


class TestLocalRefusals(GatewayCase):
    def run_step(self, event_id, name, result):
        asked = []

        def model():
            asked.append(1)
            return result

        gw = self.start(lambda ctx: ctx.step(name, model), *harness.FAST_DEAD_LETTER)
        gw.post(harness.event(event_id, "K", 1))
        self.assertEqual(gw.final(event_id), "dead_lettered")
        return asked, gw

    def test_a_step_result_over_the_limit_is_permanent_and_the_model_asked_once(self):
        asked, gw = self.run_step("r1", "plan", "x" * (256 << 10))
        self.assertEqual(len(asked), 1, "the model was asked again")
        self.assertEqual(gw.effects("r1")["step:plan"]["state"], "failed")

    def test_a_step_result_with_nan_is_permanent_and_the_model_asked_once(self):
        asked, gw = self.run_step("r2", "plan", {"score": math.nan})
        self.assertEqual(len(asked), 1, "the model was asked again")
        self.assertEqual(gw.effects("r2")["step:plan"]["state"], "failed")

    def test_a_bad_step_name_is_permanent_and_the_model_never_asked(self):
        asked, gw = self.run_step("r3", "bad name!", 1)
        self.assertEqual(asked, [])

    def test_the_reasons_say_what_was_refused(self):
        grant = {"kind": "step", "name": "plan", "state": "pending", "granted": True, "call": 1,
                 "idempotency_key": "sbx-1", "heartbeat_ms": 1000}
        gateway = Canned(self, 200, json.dumps(grant).encode(), {"Content-Type": "application/json"})
        agent = seqbox.Agent(lambda ctx: None, [gateway.url], log=lambda msg: None)
        for name, fn, want in (("plan", lambda: math.inf, "NaN or Infinity"),
                               ("plan", lambda: "x" * (256 << 10), "262144"),
                               ("bad name!", lambda: 1, "not allowed")):
            agent.handler = lambda ctx: ctx.step(name, fn)
            resp = agent.handle("POST", HEADERS, EVENT)
            self.assertEqual(resp.status, 422, resp.body)
            self.assertIn(want, json.loads(resp.body)["detail"])
