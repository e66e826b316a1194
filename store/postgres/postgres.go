// Package postgres is the seqbox store for teams that outgrow one machine:
// the inbox lives in the PostgreSQL they already run, and many consumer
// processes on many machines compete safely through its constraints (the
// unique inbox key, and a locked compare-and-set on each key's version).
package postgres

import (
	"context"

	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/store"
)

// dialect is PostgreSQL's flavour of the shared SQL.
var dialect = sqlstore.Dialect{
	Name:          "postgres",
	Serial:        "BIGSERIAL PRIMARY KEY",
	Blob:          "BYTEA",
	ListTables:    `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`,
	LockRow:       " FOR UPDATE",
	MigrationLock: `SELECT pg_advisory_xact_lock(7357211)`,
}

// IsURL reports whether s names a PostgreSQL database.
func IsURL(s string) bool { return pgdb.IsURL(s) }

// Open opens the store at url and runs pending migrations. A schema that
// holds tables but no seqbox_meta is refused and left untouched, as is a
// schema migrated by a newer seqbox.
func Open(ctx context.Context, rawURL string) (store.Store, error) {
	db, err := pgdb.Open(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	s, err := sqlstore.Open(ctx, db, dialect, Redact(rawURL))
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Redact hides the password in a database URL, for messages.
func Redact(rawURL string) string { return pgdb.Redact(rawURL) }
