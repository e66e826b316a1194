package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

// openStore opens the store a --db value names: a SQLite path (or
// sqlite:// URL) or a postgres:// URL. An empty value means a fresh temporary file, removed by
// the returned cleanup.
func openStore(ctx context.Context, db string) (store.Store, func(), error) {
	cleanup := func() {}
	if db == "" {
		dir, err := os.MkdirTemp("", "seqbox-")
		if err != nil {
			return nil, nil, err
		}
		cleanup = func() { os.RemoveAll(dir) }
		db = filepath.Join(dir, sqlite.DefaultPath)
	}
	s, err := dbopen.Store(ctx, db)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return s, func() { s.Close(); cleanup() }, nil
}
