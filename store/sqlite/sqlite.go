// Package sqlite is seqbox's embedded default store: one SQLite file in WAL
// mode with synchronous=FULL, through the pure-Go modernc.org/sqlite
// driver, so nothing needs to be installed.
package sqlite

import (
	"context"
	"strings"

	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/store"
)

// DefaultPath is the file seqbox uses when none is given.
const DefaultPath = "seqbox.db"

var dialect = sqlstore.Dialect{
	Name:       "sqlite",
	Serial:     "INTEGER PRIMARY KEY AUTOINCREMENT",
	Blob:       "BLOB",
	ListTables: sqlitedb.ListTables,
}

// Open opens or creates the store at path and runs pending migrations. A
// file that is not SQLite, or a SQLite database with tables that are not
// seqbox's, is refused and left untouched.
func Open(ctx context.Context, path string) (store.Store, error) {
	path = strings.TrimPrefix(path, "sqlite://")
	db, err := sqlitedb.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	s, err := sqlstore.Open(ctx, db, dialect, path)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}
