"""What the gateway bounds (an effect's ref and a call's error at 4096
bytes, docs/agents.md), cut by the SDK to fit, at a character boundary."""

from tests import harness
from tests.test_agent_over_gateway import GatewayCase

import seqbox

LIMIT = 4096


class TestTexts(GatewayCase):
    def test_a_long_non_ascii_refusal_of_an_effect_is_recorded_failed(self):
        def refuse(key):
            raise seqbox.Permanent("отказ " * 1000)  # 6 bytes a word of 5 characters and a space: 11,000 bytes

        gw = self.start(lambda ctx: ctx.effect("refund", refuse), *harness.FAST_DEAD_LETTER)
        gw.post(harness.event("lt1", "K", 1))
        self.assertEqual(gw.final("lt1"), "dead_lettered")
        row = gw.effects("lt1")["refund"]
        self.assertEqual(row["state"], "failed", row)
        err = row["last_error"].encode("utf-8")
        self.assertLessEqual(len(err), LIMIT)
        self.assertGreater(len(err), LIMIT - 4, "cut at the limit, not before")
        self.assertTrue(("Permanent: " + "отказ " * 1000).startswith(row["last_error"]))

    def test_a_long_non_ascii_ref_is_recorded_cut_and_returned_as_recorded(self):
        refs = []

        def handle(ctx):
            refs.append(ctx.effect("refund", lambda key: "ключ" * 2000))
            if len(refs) == 1:
                raise seqbox.Retry("again", after=0)

        gw = self.start(handle, *harness.FAST_DEAD_LETTER)
        gw.post(harness.event("lt2", "K", 1))
        self.assertEqual(gw.final("lt2"), "applied")
        row = gw.effects("lt2")["refund"]
        self.assertEqual(row["state"], "succeeded", row)
        self.assertEqual(refs, [row["ref"], row["ref"]], "the call's ref is the one recorded, every time")
        self.assertEqual(len(row["ref"].encode("utf-8")), LIMIT)
        self.assertTrue(("ключ" * 2000).startswith(row["ref"]))
