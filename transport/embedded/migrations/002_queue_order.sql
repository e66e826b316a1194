-- Receive takes the oldest ready messages in publication order (seq). An
-- index in that order, holding visible_at, lets it skip the leased rows
-- at the head of the queue instead of sorting every ready row of a
-- backlog; the index by visible_at that preceded it goes.
CREATE INDEX IF NOT EXISTS seqbox_queue_order ON seqbox_queue (queue, seq, visible_at);
DROP INDEX IF EXISTS seqbox_queue_ready
