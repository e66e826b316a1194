-- A key's baseline: the version it first committed (or passed over),
-- kept from then on. Without a configured FirstVersion the first version
-- seen becomes a new key's baseline, and a lower version that comes after
-- it is stale; the gate says so in those words, and the metric
-- seqbox_stale_before_baseline_total counts it. NULL for a key that has
-- committed nothing, or that did before this migration.
ALTER TABLE seqbox_keys ADD COLUMN baseline BIGINT
