-- The ledger's idempotency keys are indexed for the calls that are open
-- (pending, uncertain or failed), not for every call ever made: a call
-- is found by its identity and action (the primary key) everywhere but
-- an operator's or another process's lookup by key, and those look for
-- open calls. An index over every key grew with the ledger and put each
-- new call on a page of its own, in a second tree beside the primary
-- key's (docs/benchmarks-history.md §42).
DROP INDEX seqbox_effects_key;
CREATE UNIQUE INDEX seqbox_effects_open_key ON seqbox_effects (idempotency_key) WHERE state <> 'succeeded'
