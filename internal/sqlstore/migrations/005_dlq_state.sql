-- A DLQ row's state is a typed column; resolution keeps the words.
ALTER TABLE seqbox_dlq ADD COLUMN state TEXT NOT NULL DEFAULT 'open';
	UPDATE seqbox_dlq SET state = CASE
		WHEN resolution = '' THEN 'open'
		WHEN resolution LIKE 'skipped%' THEN 'skipped'
		WHEN resolution = 'redrive_failed' THEN 'redrive_failed'
		ELSE 'redriven' END;
	CREATE INDEX seqbox_dlq_state ON seqbox_dlq (consumer, state, seq)
