package embedded

import (
	"embed"

	"github.com/seqbox/seqbox/internal/ddl"
)

// migrationFiles holds the queue's schema, migrations/NNN_what.sql (see
// ddl.Migration for the format), {{SERIAL}} and {{BLOB}} filled in by the
// dialect. The queue records no schema version: every file runs, in
// order, on every open, so every statement in them must be idempotent
// (IF NOT EXISTS). A released file is never edited, not even its
// indentation (SQLite keeps the text of every CREATE as it was run).
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the queue's schema steps in order. Numbering gaps or
// duplicates stop the program at start.
var migrations = ddl.MustLoad(migrationFiles, "migrations")
