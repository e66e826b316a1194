// Package dbopen turns a --db value into a store: a SQLite path (or
// sqlite:// URL) or a postgres:// URL.
package dbopen

import (
	"context"

	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/sqlite"
)

// Store opens the store db names.
func Store(ctx context.Context, db string) (store.Store, error) {
	if postgres.IsURL(db) {
		return postgres.Open(ctx, db)
	}
	return sqlite.Open(ctx, db)
}
