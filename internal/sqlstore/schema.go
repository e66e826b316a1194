package sqlstore

import (
	"embed"

	"github.com/seqbox/seqbox/internal/ddl"
)

// migrationFiles holds the store's schema steps, migrations/NNN_what.sql
// (see ddl.Migration for the format). Each is written once for every
// dialect, {{SERIAL}} and {{BLOB}} filled in by it; times are Unix
// microseconds in BIGINT columns.
//
// A released file is never edited, not even its indentation: a database
// migrated past it would not see the change, and SQLite keeps the text of
// every CREATE as it was run. A change to the schema is a new file with the
// next number; seqbox_meta's schema_version is the number of the last
// step a database has run.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the store's schema steps in order: migrations[i] has
// version i+1. Numbering gaps or duplicates stop the program at start.
var migrations = ddl.MustLoad(migrationFiles, "migrations")
