// Package dbopen turns a --db value into a store. A value is a PostgreSQL
// URL when it starts with postgres:// or postgresql://, a SQLite URI when
// it starts with file:, and otherwise a SQLite file path, every character
// of it ('#', '?', '%' included) part of the file name. Any other
// scheme:// is refused.
package dbopen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/sqlite"
)

// Store opens the store db names with store.Exclusive: an empty or
// seqbox-only database, anything else refused untouched.
func Store(ctx context.Context, db string) (store.Store, error) {
	return StoreAccess(ctx, db, store.Exclusive)
}

// StoreOwned opens the store db names for writing as its owner left it:
// an empty database, or one seqbox made (seqbox_meta owner seqbox),
// with store.Exclusive, so that it stays seqbox's; an application's (or
// one with other objects beside seqbox's) with store.Adopt, as the
// library opens it, which writes nothing but seqbox's own objects.
func StoreOwned(ctx context.Context, db string) (store.Store, error) {
	st, err := StoreAccess(ctx, db, store.Exclusive)
	if errors.Is(err, store.ErrForeignDatabase) {
		return StoreAccess(ctx, db, store.Adopt)
	}
	return st, err
}

// StoreAccess opens the store db names as access allows (see
// sqlite.OpenWith and postgres.OpenWith).
func StoreAccess(ctx context.Context, db string, access store.Access) (store.Store, error) {
	if err := Check(db); err != nil {
		return nil, err
	}
	if postgres.IsURL(db) {
		return postgres.OpenWith(ctx, db, postgres.Options{Access: access})
	}
	st, err := sqlite.OpenWith(ctx, db, sqlite.Options{Access: access})
	if errors.Is(err, fs.ErrNotExist) {
		// Only a read-only open does not create the file.
		return nil, fmt.Errorf("--db %s: %w", db, syscall.ENOENT)
	}
	return st, err
}

// Check refuses a --db value with a scheme seqbox does not support.
func Check(db string) error {
	if postgres.IsURL(db) || strings.HasPrefix(db, "file:") {
		return nil
	}
	if s := sqlitedb.Scheme(db); s != "" {
		return fmt.Errorf("--db %s: unsupported scheme %q: seqbox stores are a SQLite file path or a postgres:// URL", db, s)
	}
	return nil
}
