-- The outbox relay's backoff: an event the publisher refused is tried
-- again from next_attempt_at on, and until then its partition key's later
-- events wait behind it while the relay reads the other keys past them.
-- The index holds only the refused events still unpublished, so finding
-- the keys that wait costs little.
ALTER TABLE seqbox_outbox ADD COLUMN next_attempt_at BIGINT;
	CREATE INDEX seqbox_outbox_backoff ON seqbox_outbox (partitionkey, next_attempt_at)
		WHERE published_at IS NULL AND next_attempt_at IS NOT NULL
