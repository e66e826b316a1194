"""A handler names what its effect produced (ctx.result_reference): the
agent sends it in the Seqbox-Result-Reference header of its 2xx answer,
and the gateway keeps it on the event's inbox row."""

import json
import unittest

import seqbox
from tests import harness
from tests.test_agent_over_gateway import GatewayCase

EVENT = b'{"id":"e1","source":"crm","type":"t"}'


def answer(handler):
    return seqbox.Agent(handler, [], log=lambda msg: None).handle("POST", {}, EVENT)


class TestHeader(unittest.TestCase):
    def test_named_on_a_204_and_a_200(self):
        def named(ctx):
            ctx.result_reference = "tâche-1"

        resp = answer(named)
        self.assertEqual(resp.status, 204)
        # The header's bytes are the reference's UTF-8 (http.server and
        # WSGI write a str header as Latin-1).
        self.assertEqual(resp.headers["Seqbox-Result-Reference"].encode("latin-1").decode("utf-8"), "tâche-1")

        def with_result(ctx):
            ctx.result_reference = "task-2"
            return {"ok": True}

        resp = answer(with_result)
        self.assertEqual((resp.status, resp.headers["Seqbox-Result-Reference"]), (200, "task-2"))
        self.assertNotIn("Seqbox-Result-Reference", answer(lambda ctx: None).headers)

    def test_an_unfit_reference_raises_where_it_is_set(self):
        for bad in ("x" * 1025, "é" * 513, "a\x00b", "a\nb", "\ud800", 7, b"bytes"):
            def handler(ctx, bad=bad):
                ctx.result_reference = bad

            resp = answer(handler)
            self.assertEqual(resp.status, 500, repr(bad)[:40])
            self.assertIn("ValueError", json.loads(resp.body)["detail"], repr(bad)[:40])
        resp = answer(lambda ctx: setattr(ctx, "result_reference", "x" * 1024))
        self.assertEqual(resp.status, 204, "1,024 bytes is the limit, not over it")


class TestOverTheGateway(GatewayCase):
    def test_the_gateway_keeps_it_on_the_inbox_row(self):
        def handle(ctx):
            ctx.result_reference = "tâche-" + ctx.id

        gw = self.start(handle)
        gw.post(harness.event("r1", "K", 1))
        gw.wait_outcome("r1")
        row = gw.admin("/v1/admin/inbox/crm/r1")
        self.assertEqual(row["result_reference"], "tâche-r1")


if __name__ == "__main__":
    unittest.main()
