-- Re-delivering what was already recorded adds no row: a duplicate
-- is counted on its inbox row; a collision is audited and parked once
-- per colliding payload.
ALTER TABLE seqbox_inbox ADD COLUMN duplicates BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE seqbox_inbox ADD COLUMN last_duplicate_at BIGINT;
	ALTER TABLE seqbox_audit ADD COLUMN payload_hash TEXT NOT NULL DEFAULT '';
	CREATE UNIQUE INDEX seqbox_audit_once ON seqbox_audit (consumer, source, id, outcome, payload_hash)
		WHERE outcome IN ('duplicate', 'collision') AND payload_hash <> '';
	DELETE FROM seqbox_parked WHERE reason = 'collision' AND seq NOT IN (
		SELECT MIN(seq) FROM seqbox_parked WHERE reason = 'collision' GROUP BY consumer, source, id, payload_hash);
	CREATE UNIQUE INDEX seqbox_parked_collision_once ON seqbox_parked (consumer, source, id, payload_hash)
		WHERE reason = 'collision'
