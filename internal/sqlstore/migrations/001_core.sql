-- Inbox, ordering state, parked messages, retries, DLQ, audit, gaps.
-- Times are Unix microseconds in BIGINT columns.
CREATE TABLE seqbox_inbox (
		consumer TEXT NOT NULL,
		source TEXT NOT NULL,
		id TEXT NOT NULL,
		payload_hash TEXT NOT NULL,
		businesskey TEXT NOT NULL DEFAULT '',
		event_type TEXT NOT NULL,
		tenant TEXT NOT NULL DEFAULT '',
		contract_version TEXT NOT NULL DEFAULT '',
		partitionkey TEXT NOT NULL DEFAULT '',
		objectversion BIGINT,
		outcome TEXT NOT NULL,
		received_at BIGINT NOT NULL,
		processed_at BIGINT,
		result_reference TEXT NOT NULL DEFAULT '',
		retention_until BIGINT NOT NULL,
		PRIMARY KEY (consumer, source, id)
	);
	CREATE INDEX seqbox_inbox_retention ON seqbox_inbox (consumer, retention_until);
	CREATE TABLE seqbox_business_keys (
		consumer TEXT NOT NULL,
		businesskey TEXT NOT NULL,
		source TEXT NOT NULL,
		id TEXT NOT NULL,
		applied_at BIGINT NOT NULL,
		PRIMARY KEY (consumer, businesskey)
	);
	CREATE TABLE seqbox_keys (
		consumer TEXT NOT NULL,
		partitionkey TEXT NOT NULL,
		version BIGINT,
		blocked INTEGER NOT NULL DEFAULT 0,
		blocked_source TEXT NOT NULL DEFAULT '',
		blocked_id TEXT NOT NULL DEFAULT '',
		blocked_reason TEXT NOT NULL DEFAULT '',
		blocked_since BIGINT,
		updated_at BIGINT NOT NULL,
		PRIMARY KEY (consumer, partitionkey)
	);
	CREATE TABLE seqbox_parked (
		seq {{SERIAL}},
		consumer TEXT NOT NULL,
		source TEXT NOT NULL,
		id TEXT NOT NULL,
		partitionkey TEXT NOT NULL,
		objectversion BIGINT,
		reason TEXT NOT NULL,
		detail TEXT NOT NULL DEFAULT '',
		envelope {{BLOB}} NOT NULL,
		payload_hash TEXT NOT NULL,
		parked_at BIGINT NOT NULL,
		hold_until BIGINT
	);
	CREATE INDEX seqbox_parked_key ON seqbox_parked (consumer, partitionkey, reason);
	CREATE INDEX seqbox_parked_hold ON seqbox_parked (consumer, hold_until);
	CREATE TABLE seqbox_retries (
		consumer TEXT NOT NULL,
		source TEXT NOT NULL,
		id TEXT NOT NULL,
		partitionkey TEXT NOT NULL DEFAULT '',
		attempts INTEGER NOT NULL,
		first_error TEXT NOT NULL,
		last_error TEXT NOT NULL,
		first_at BIGINT NOT NULL,
		last_at BIGINT NOT NULL,
		PRIMARY KEY (consumer, source, id)
	);
	CREATE INDEX seqbox_retries_key ON seqbox_retries (consumer, partitionkey);
	CREATE TABLE seqbox_dlq (
		seq {{SERIAL}},
		consumer TEXT NOT NULL,
		source TEXT NOT NULL DEFAULT '',
		id TEXT NOT NULL DEFAULT '',
		partitionkey TEXT NOT NULL DEFAULT '',
		objectversion BIGINT,
		payload_hash TEXT NOT NULL DEFAULT '',
		envelope {{BLOB}} NOT NULL,
		reason TEXT NOT NULL,
		attempts INTEGER NOT NULL,
		first_error TEXT NOT NULL DEFAULT '',
		last_error TEXT NOT NULL DEFAULT '',
		dead_at BIGINT NOT NULL,
		resolution TEXT NOT NULL DEFAULT '',
		resolved_at BIGINT
	);
	CREATE INDEX seqbox_dlq_identity ON seqbox_dlq (consumer, source, id);
	CREATE TABLE seqbox_audit (
		seq {{SERIAL}},
		consumer TEXT NOT NULL,
		source TEXT NOT NULL DEFAULT '',
		id TEXT NOT NULL DEFAULT '',
		partitionkey TEXT NOT NULL DEFAULT '',
		received_version BIGINT,
		current_version BIGINT,
		outcome TEXT NOT NULL,
		reason TEXT NOT NULL DEFAULT '',
		next_action TEXT NOT NULL DEFAULT '',
		at BIGINT NOT NULL
	);
	CREATE INDEX seqbox_audit_key ON seqbox_audit (consumer, partitionkey);
	CREATE TABLE seqbox_gaps (
		seq {{SERIAL}},
		consumer TEXT NOT NULL,
		partitionkey TEXT NOT NULL,
		from_version BIGINT NOT NULL,
		to_version BIGINT NOT NULL,
		decided_by TEXT NOT NULL,
		reason TEXT NOT NULL,
		at BIGINT NOT NULL
	);
