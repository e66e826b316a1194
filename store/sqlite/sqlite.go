// Package sqlite is seqbox's embedded default store: one SQLite file in WAL
// mode with synchronous=FULL, through the pure-Go modernc.org/sqlite
// driver, so nothing needs to be installed.
//
// The file may be the application's own database: the inbox must commit in
// the same transaction as the business tables, so seqbox adopts an existing
// SQLite database and creates only its own seqbox_ tables in it. See
// OpenWith for what each store.Access may do to the file.
package sqlite

import (
	"context"

	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/store"
)

// DefaultPath is the file seqbox uses when none is given.
const DefaultPath = "seqbox.db"

// Options say how OpenWith treats the database.
type Options struct {
	// Access is what opening may do to the file; the zero value is
	// store.Adopt.
	Access store.Access
}

// Open opens the SQLite database at path with store.Adopt, creating the
// file if it does not exist, and creates or migrates seqbox's own tables in
// it. It is OpenWith with the zero Options.
func Open(ctx context.Context, path string) (store.Store, error) {
	return OpenWith(ctx, path, Options{})
}

// OpenWith opens the SQLite database at path as opt.Access allows.
//
// path is a file path, every character of it part of the file name ('#',
// '?' and '%' included), or a SQLite "file:" URI, passed to SQLite as
// written. A non-empty file that is not a SQLite database is refused with
// store.ErrForeignDatabase, untouched, in every mode.
//
//   - store.Adopt (the default) opens any SQLite database and creates or
//     migrates only seqbox's own objects, tables named seqbox_…, next to the
//     application's. It never touches the application's tables, with one
//     exception the application chooses by sharing its file: the file is
//     switched to WAL (journal_mode=WAL, a persistent property of the file),
//     which seqbox needs so that several processes can work on it at once.
//     The database is recorded as the application's, so that later
//     store.Exclusive opens refuse it.
//   - store.Exclusive accepts only an empty (or missing) file or a database
//     that is seqbox's (it has seqbox_meta and was not adopted). Anything
//     else (tables, views, triggers or indexes that are not seqbox's, a
//     user_version or application_id) is refused with
//     store.ErrForeignDatabase, the file left byte for byte as it was, with
//     no -wal, -shm or -journal file created beside it (one case aside: a
//     WAL-mode file whose -wal holds transactions but whose -shm is gone
//     gets the -shm SQLite needs to read them).
//   - store.ReadOnly writes nothing: no migration, no switch to WAL, and a
//     file in rollback-journal mode gets no file beside it. The file must
//     exist and hold seqbox's tables (an empty file stays empty and is
//     refused). It works on a read-only file, and in a read-only directory
//     unless the file's -wal holds transactions SQLite would need a new -shm
//     to read. Writes through the store's pool fail.
//
// A database migrated by a newer seqbox is refused with
// store.ErrSchemaTooNew.
func OpenWith(ctx context.Context, path string, opt Options) (store.Store, error) {
	db, err := sqlitedb.OpenAccess(ctx, path, opt.Access)
	if err != nil {
		return nil, err
	}
	s, err := sqlstore.OpenWith(ctx, db, sqlitedb.Dialect, path, opt.Access)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.SetLocation(sqlitedb.FileOf(path))
	return s, nil
}
