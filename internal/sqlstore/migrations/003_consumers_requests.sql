-- Consumer registrations and operator requests, executed by the
-- consumer that owns the handler (DESIGN §4).
CREATE TABLE seqbox_consumers (
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
	CREATE INDEX seqbox_requests_pending ON seqbox_requests (consumer, state, seq)
