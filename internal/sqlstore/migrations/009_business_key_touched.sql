-- An identity that settled without applying (dead-lettered, stale,
-- expired) may still have had its effect done through the effects ledger;
-- another identity asking for the same business key must not ask again
-- (BusinessKeyTouched; found by the protocol's model checker). The index
-- holds only such rows with a business key, so applies do not pay for it.
CREATE INDEX seqbox_inbox_unapplied_businesskey ON seqbox_inbox (consumer, businesskey)
	WHERE businesskey <> '' AND outcome IN ('dead_lettered', 'stale', 'expired')
