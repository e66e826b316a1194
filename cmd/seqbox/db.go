package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

// openStore opens the store a --db value names: a SQLite path (or
// sqlite:// URL). An empty value means a fresh temporary file, removed by
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
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		cleanup()
		return nil, nil, fmt.Errorf("--db %s: PostgreSQL is not built into this seqbox yet", redact(db))
	}
	s, err := sqlite.Open(ctx, db)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return s, func() { s.Close(); cleanup() }, nil
}

// redact hides a password in a database URL.
func redact(u string) string {
	at := strings.LastIndexByte(u, '@')
	scheme := strings.Index(u, "://")
	if at < 0 || scheme < 0 {
		return u
	}
	cred := u[scheme+3 : at]
	if i := strings.IndexByte(cred, ':'); i >= 0 {
		return u[:scheme+3] + cred[:i] + ":***" + u[at:]
	}
	return u
}
