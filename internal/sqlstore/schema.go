package sqlstore

// migrations are numbered schema steps, run in order on open. Each is
// written once for every dialect: {{SERIAL}} and {{BLOB}} are filled in by
// the dialect. Times are Unix microseconds in BIGINT columns.
var migrations = []string{
	// 1: inbox, ordering state, parked messages, retries, DLQ, audit, gaps.
	`CREATE TABLE seqbox_inbox (
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
	);`,
	// 2: agent decisions recorded under the message identity.
	`CREATE TABLE seqbox_decisions (
		consumer TEXT NOT NULL,
		source TEXT NOT NULL,
		id TEXT NOT NULL,
		decision {{BLOB}} NOT NULL,
		decided_at BIGINT NOT NULL,
		PRIMARY KEY (consumer, source, id)
	)`,
	// 3: consumer registrations and operator requests, executed by the
	// consumer that owns the handler (DESIGN §4).
	`CREATE TABLE seqbox_consumers (
		consumer TEXT PRIMARY KEY,
		handler_kind TEXT NOT NULL,
		policies TEXT NOT NULL,
		process TEXT NOT NULL,
		started_at BIGINT NOT NULL,
		heartbeat_at BIGINT
	);
	CREATE TABLE seqbox_requests (
		seq {{SERIAL}},
		consumer TEXT NOT NULL,
		action TEXT NOT NULL,
		target TEXT NOT NULL,
		requested_by TEXT NOT NULL,
		reason TEXT NOT NULL DEFAULT '',
		requested_at BIGINT NOT NULL,
		state TEXT NOT NULL,
		taken_by TEXT NOT NULL DEFAULT '',
		taken_at BIGINT,
		result TEXT NOT NULL DEFAULT '',
		error TEXT NOT NULL DEFAULT '',
		done_at BIGINT
	);
	CREATE INDEX seqbox_requests_pending ON seqbox_requests (consumer, state, seq)`,
	// 4: re-delivering what was already recorded adds no row: a duplicate
	// is counted on its inbox row; a collision is audited and parked once
	// per colliding payload.
	`ALTER TABLE seqbox_inbox ADD COLUMN duplicates BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE seqbox_inbox ADD COLUMN last_duplicate_at BIGINT;
	ALTER TABLE seqbox_audit ADD COLUMN payload_hash TEXT NOT NULL DEFAULT '';
	CREATE UNIQUE INDEX seqbox_audit_once ON seqbox_audit (consumer, source, id, outcome, payload_hash)
		WHERE outcome IN ('duplicate', 'collision') AND payload_hash <> '';
	DELETE FROM seqbox_parked WHERE reason = 'collision' AND seq NOT IN (
		SELECT MIN(seq) FROM seqbox_parked WHERE reason = 'collision' GROUP BY consumer, source, id, payload_hash);
	CREATE UNIQUE INDEX seqbox_parked_collision_once ON seqbox_parked (consumer, source, id, payload_hash)
		WHERE reason = 'collision'`,
	// 5: a DLQ row's state is a typed column; resolution keeps the words.
	`ALTER TABLE seqbox_dlq ADD COLUMN state TEXT NOT NULL DEFAULT 'open';
	UPDATE seqbox_dlq SET state = CASE
		WHEN resolution = '' THEN 'open'
		WHEN resolution LIKE 'skipped%' THEN 'skipped'
		WHEN resolution = 'redrive_failed' THEN 'redrive_failed'
		ELSE 'redriven' END;
	CREATE INDEX seqbox_dlq_state ON seqbox_dlq (consumer, state, seq)`,
}
