-- The blocked keys, so that the stuck keys (`keys list`, the admin API,
-- the console's overview, which polls it) are found from what makes a key
-- stuck, not by reading every key: with a million quiet keys the listing
-- read and grouped all of them, 2.3 s a call on SQLite. Partial: a key
-- that is not blocked has no entry, and its version's updates do not
-- touch it.
CREATE INDEX seqbox_keys_blocked ON seqbox_keys (consumer, partitionkey) WHERE blocked = 1
