-- A dead letter keeps its number across redrives that fail again: the
-- identity's open row takes the new failure (attempts add up, the last
-- error and reason are the new ones) and says so on its history, one line
-- per failure after a redrive; redrives counts them.
ALTER TABLE seqbox_dlq ADD COLUMN redrives INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE seqbox_dlq ADD COLUMN history TEXT NOT NULL DEFAULT ''
