-- The queue: one row per message not yet acknowledged, leased by
-- visible_at and lease. Every statement is idempotent (IF NOT EXISTS): the
-- queue keeps no schema version and runs every file on each open. (Its
-- first index, by visible_at, is gone: 002 replaced it.)
CREATE TABLE IF NOT EXISTS seqbox_queue (
	seq {{SERIAL}},
	queue TEXT NOT NULL,
	body {{BLOB}} NOT NULL,
	visible_at BIGINT NOT NULL,
	lease TEXT NOT NULL DEFAULT '',
	attempts INTEGER NOT NULL DEFAULT 0,
	enqueued_at BIGINT NOT NULL
)
