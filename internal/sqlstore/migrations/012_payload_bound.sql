-- A turn and a decision belong to the payload of the copy they were made
-- for (docs/design.md §10.2): a copy of the identity with another payload
-- hash is a collision, never decided, dispatched or applied with them.
-- An empty hash is a row written before this migration, bound to none.
ALTER TABLE seqbox_retries ADD COLUMN payload_hash TEXT NOT NULL DEFAULT '';
	ALTER TABLE seqbox_decisions ADD COLUMN payload_hash TEXT NOT NULL DEFAULT ''
