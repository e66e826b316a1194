-- Agent decisions recorded under the message identity.
CREATE TABLE seqbox_decisions (
		consumer TEXT NOT NULL,
		source TEXT NOT NULL,
		id TEXT NOT NULL,
		decision {{BLOB}} NOT NULL,
		decided_at BIGINT NOT NULL,
		PRIMARY KEY (consumer, source, id)
	)
