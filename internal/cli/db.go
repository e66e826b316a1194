package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

// openStore opens the store a --db value names with store.Exclusive (the
// creating commands): see openStoreAccess.
func openStore(ctx context.Context, db string) (store.Store, func(), error) {
	return openStoreAccess(ctx, db, store.Exclusive)
}

// openStoreAccess opens the store a --db value names (a SQLite file path,
// a file: URI or a postgres:// URL) as access allows. An empty value means
// a fresh temporary file, removed by the returned cleanup; a read-only
// open needs a database and refuses an empty value.
func openStoreAccess(ctx context.Context, db string, access store.Access) (store.Store, func(), error) {
	cleanup := func() {}
	if db == "" {
		if access == store.ReadOnly {
			return nil, nil, fmt.Errorf("--db is required: the database to read")
		}
		dir, err := os.MkdirTemp("", "seqbox-")
		if err != nil {
			return nil, nil, err
		}
		cleanup = func() { os.RemoveAll(dir) }
		db = filepath.Join(dir, sqlite.DefaultPath)
	}
	s, err := dbopen.StoreAccess(ctx, db, access)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return s, func() { s.Close(); cleanup() }, nil
}
