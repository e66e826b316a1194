-- The gateway's tables (seqbox serve): the envelope of every event its
-- handler applied, so that a collision can be shown with both payloads
-- (the inbox keeps only the first one's hash), and tombstones of the
-- identities retention purged, so that one delivered again after its
-- purge is counted. Both are keyed by a hash of (consumer, source, id),
-- which bounds the key whatever the attribute lengths. An earlier seqbox
-- serve created these tables itself, at run time, as gateway_envelopes
-- and gateway_tombstones on the store's pool: this migration's Go step
-- (upgrade.go) moves their rows here and drops them, when they are
-- exactly those tables; an application's table of either name is left
-- alone.
CREATE TABLE seqbox_gateway_envelopes (
	ident TEXT PRIMARY KEY,
	consumer TEXT NOT NULL,
	source TEXT NOT NULL,
	id TEXT NOT NULL,
	envelope TEXT NOT NULL,
	applied_at BIGINT NOT NULL,
	businesskey TEXT NOT NULL DEFAULT ''
);
CREATE INDEX seqbox_gateway_envelopes_applied ON seqbox_gateway_envelopes (consumer, applied_at);
CREATE INDEX seqbox_gateway_envelopes_businesskey ON seqbox_gateway_envelopes (consumer, businesskey);
CREATE TABLE seqbox_gateway_tombstones (
	ident TEXT PRIMARY KEY,
	consumer TEXT NOT NULL,
	purged_at BIGINT NOT NULL
);
CREATE INDEX seqbox_gateway_tombstones_purged ON seqbox_gateway_tombstones (consumer, purged_at)
