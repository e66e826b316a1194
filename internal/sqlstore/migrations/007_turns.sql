-- The agent path's turns and leases. A retry row is also its key's turn:
-- it is written before a decision is asked for, so the key's successors
-- wait behind it, and its businesskey reserves the effect it asks for
-- while it is decided. A ledger row's lease_until follows its caller's
-- heartbeat, so the pending call of a dead caller shows within seconds.
ALTER TABLE seqbox_retries ADD COLUMN businesskey TEXT NOT NULL DEFAULT '';
	CREATE INDEX seqbox_retries_businesskey ON seqbox_retries (consumer, businesskey);
	ALTER TABLE seqbox_effects ADD COLUMN lease_until BIGINT
