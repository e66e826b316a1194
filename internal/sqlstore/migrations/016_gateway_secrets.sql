-- The gateway's secrets (seqbox serve), by name: the key of the HMAC that
-- makes each dispatched event's Seqbox-Effects-Token, drawn from
-- crypto/rand by the first serve process that needs it and kept here, so
-- that every process on the database and every restart checks the same
-- tokens. The first insert wins (the primary key decides a race).
CREATE TABLE seqbox_gateway_secrets (
	name TEXT PRIMARY KEY,
	secret TEXT NOT NULL,
	created_at BIGINT NOT NULL
)
