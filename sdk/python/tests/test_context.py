"""What the handler's context holds: the event's attributes and the
gateway's headers, decoded as the gateway wrote them."""

import json
import sys
import threading

from tests import harness
from tests.test_agent_over_gateway import GatewayCase

import seqbox

KEYS = ("キー", "ключ")


def key_event(event_id, key):
    return {"specversion": "1.0", "id": event_id, "source": "crm", "type": "t", "partitionkey": key, "objectversion": 1}


class TestPartitionKey(GatewayCase):
    def test_a_non_ascii_key_reaches_the_handler_as_it_was_sent(self):
        keys = {}

        def handle(ctx):
            keys[ctx.id] = ctx.key

        gw = self.start(handle)
        for i, k in enumerate(KEYS):
            gw.post(key_event(f"nk{i}", k))
        for i in range(len(KEYS)):
            gw.wait_outcome(f"nk{i}")
        self.assertEqual([keys[f"nk{i}"] for i in range(len(KEYS))], list(KEYS))

    def test_a_non_ascii_key_reaches_a_wsgi_handler_as_it_was_sent(self):
        from wsgiref.simple_server import make_server
        sys.path.insert(0, harness.os.path.join(harness.SDK, "examples"))
        import wsgi_agent
        keys = {}

        def handle(ctx):
            keys[ctx.id] = ctx.key

        agent = seqbox.Agent(handle, [], log=lambda msg: None)
        port = harness.free_port()
        gw = harness.Serve(self.db, "http://127.0.0.1:%d/" % port)
        self.addCleanup(gw.stop)
        server = make_server("127.0.0.1", port, agent.wsgi, handler_class=wsgi_agent.QuietHandler)
        harness.serve_in_thread(server)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        for i, k in enumerate(KEYS):
            gw.post(key_event(f"wk{i}", k))
        for i in range(len(KEYS)):
            gw.wait_outcome(f"wk{i}")
        self.assertEqual([keys[f"wk{i}"] for i in range(len(KEYS))], list(KEYS))

    def test_the_header_alone_is_decoded_as_utf8(self):
        """An event without partitionkey in its body (binary mode's
        header only): the header's bytes, which http.server and WSGI hand
        over as Latin-1, are UTF-8."""
        seen = []
        agent = seqbox.Agent(lambda ctx: seen.append(ctx.key), [])
        for k in KEYS:
            latin1 = k.encode("utf-8").decode("latin-1")
            agent.handle("POST", {"Seqbox-Partition-Key": latin1}, b'{"id":"h","source":"s","type":"t"}')
        agent.handle("POST", {"Seqbox-Partition-Key": "plain"}, b'{"id":"h","source":"s","type":"t"}')
        self.assertEqual(seen, [*KEYS, "plain"])


class TestEffectReference(GatewayCase):
    def test_a_reference_that_is_not_a_string_is_kept_as_its_json(self):
        # str() of a dict kept Python's repr ({'id': 42}), and the
        # TypeScript SDK "[object Object]": both keep its JSON now.
        refs = {}

        def handle(ctx):
            refs[ctx.id] = ctx.effect("crm.create_task", lambda key: {"id": 42, "key": key})

        gw = self.start(handle)
        gw.post({"specversion": "1.0", "id": "r1", "source": "crm", "type": "t"})
        gw.wait_outcome("r1")
        decoded = json.loads(refs["r1"])
        self.assertEqual(decoded["id"], 42)
        self.assertTrue(decoded["key"].startswith("sbx-"), refs["r1"])
