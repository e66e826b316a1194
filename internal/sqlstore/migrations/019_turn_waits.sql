-- The deliveries of a message that ended in a wait for a call or a
-- decision running elsewhere (an agent's step still running, a live
-- caller's pending ledger row, its business key decided under another
-- identity): no failure, and no crash. The crash-loop bound counts the
-- broker's deliveries with no outcome; these are left out of it, or a
-- call that ran long had its message dead-lettered while it still ran.
ALTER TABLE seqbox_retries ADD COLUMN waits BIGINT NOT NULL DEFAULT 0
