-- The ledger's indexes beside its primary key cover the calls that are
-- open (pending, uncertain or failed), not every call ever made: a call
-- is found by its identity and action (the primary key) everywhere but
-- an operator's or another process's lookup by key, and those look for
-- open calls, as the lists by state and the uncertain calls' metrics do
-- (a list of succeeded calls reads the ledger). Indexes over every call
-- grew with the ledger: the key's put each new call on a page of its
-- own, in a second tree beside the primary key's, and the state's took
-- an entry more for every call that succeeded
-- (docs/benchmarks-history.md §42).
DROP INDEX seqbox_effects_key;
CREATE UNIQUE INDEX seqbox_effects_open_key ON seqbox_effects (idempotency_key) WHERE state <> 'succeeded';
DROP INDEX seqbox_effects_state;
CREATE INDEX seqbox_effects_open_state ON seqbox_effects (state, updated_at) WHERE state <> 'succeeded'
