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

// openReadOnly opens the store a --db value names with store.ReadOnly (the
// inspecting commands).
func openReadOnly(ctx context.Context, db string) (store.Store, func(), error) {
	return openStoreAccess(ctx, db, store.ReadOnly)
}

// openForOperator opens, for an operator's writes (purge, effects
// resolve), a database that already holds seqbox's data: one that holds
// none is refused as the inspecting commands refuse it (a read-only open
// comes first), and nothing is created or migrated into it. It is then
// opened as openOwned opens it.
func openForOperator(ctx context.Context, db string) (store.Store, func(), error) {
	_, closeStore, err := openReadOnly(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	closeStore()
	return openOwned(ctx, db)
}

// openOwned opens a database that holds seqbox's data for writing, as its
// owner left it: one the CLI made (replay, demo, bench: seqbox_meta owner
// seqbox) stays the CLI's (store.Exclusive), where store.Adopt would mark
// it an application's and refuse the next replay; an application's (or
// one with other tables beside seqbox's) is opened as the library opens
// it (store.Adopt), which writes nothing but seqbox's own tables.
func openOwned(ctx context.Context, db string) (store.Store, func(), error) {
	st, err := dbopen.StoreOwned(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	return st, func() { st.Close() }, nil
}
