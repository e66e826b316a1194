-- The identities the gateway's ingest accepted (seqbox serve), recorded in
-- the transaction that queues them, so that a copy posted again answers
-- 200 duplicate (same payload hash) or 409 collision (another) at once,
-- with the first copy's time, instead of 202 and the agent's silence.
-- Keyed by the hash of (consumer, source, id), as the gateway's other
-- tables; retention removes them with the envelopes.
CREATE TABLE seqbox_gateway_accepted (
	ident TEXT PRIMARY KEY,
	consumer TEXT NOT NULL,
	source TEXT NOT NULL,
	id TEXT NOT NULL,
	payload_hash TEXT NOT NULL,
	accepted_at BIGINT NOT NULL
);
CREATE INDEX seqbox_gateway_accepted_at ON seqbox_gateway_accepted (consumer, accepted_at)
