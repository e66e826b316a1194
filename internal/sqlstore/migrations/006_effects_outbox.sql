-- The external-effects ledger: one row per (identity, action), committed
-- before the call; the outbox: events a handler emitted in its
-- transaction, published by the relay after commit; and the claims of
-- decisions in flight, so a redelivery does not ask the model again.
CREATE TABLE seqbox_effects (
		consumer TEXT NOT NULL,
		source TEXT NOT NULL,
		id TEXT NOT NULL,
		action TEXT NOT NULL,
		idempotency_key TEXT NOT NULL,
		state TEXT NOT NULL,
		ref TEXT NOT NULL DEFAULT '',
		last_error TEXT NOT NULL DEFAULT '',
		calls INTEGER NOT NULL DEFAULT 0,
		created_at BIGINT NOT NULL,
		updated_at BIGINT NOT NULL,
		uncertain_at BIGINT,
		reconciled_at BIGINT,
		PRIMARY KEY (consumer, source, id, action)
	);
	CREATE UNIQUE INDEX seqbox_effects_key ON seqbox_effects (idempotency_key);
	CREATE INDEX seqbox_effects_state ON seqbox_effects (state, updated_at);
	CREATE TABLE seqbox_outbox (
		seq {{SERIAL}},
		origin TEXT NOT NULL DEFAULT '',
		partitionkey TEXT NOT NULL,
		event_id TEXT NOT NULL,
		body {{BLOB}} NOT NULL,
		created_at BIGINT NOT NULL,
		published_at BIGINT,
		attempts INTEGER NOT NULL DEFAULT 0,
		last_error TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX seqbox_outbox_unpublished ON seqbox_outbox (seq) WHERE published_at IS NULL;
	CREATE TABLE seqbox_outbox_relay (
		name TEXT PRIMARY KEY,
		owner TEXT NOT NULL,
		expires_at BIGINT NOT NULL
	);
	CREATE TABLE seqbox_decision_claims (
		consumer TEXT NOT NULL,
		source TEXT NOT NULL,
		id TEXT NOT NULL,
		owner TEXT NOT NULL,
		expires_at BIGINT NOT NULL,
		PRIMARY KEY (consumer, source, id)
	)
