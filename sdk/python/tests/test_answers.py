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
        for after in (math.nan, math.inf, -math.inf, -1):
            with self.assertRaises(ValueError, msg=after):
                seqbox.Retry("later", after=after)

            def handler(ctx, after=after):
                raise seqbox.Retry("later", after=after)

            problem = self.assertProblem500(answer(handler), after)
            self.assertIn("after", problem["detail"])
        self.assertEqual(answer(lambda ctx: (_ for _ in ()).throw(seqbox.Retry("x", after=0))).headers["Retry-After"], "1")
