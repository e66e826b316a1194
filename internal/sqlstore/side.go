package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	"github.com/seqbox/seqbox/internal/ddl"
)

// opened holds the Dialect of every pool a store is open on (*sql.DB to
// Dialect): the driver that opened the pool said which database it is, so
// that code given only the pool (EnsureTables) never guesses. OpenWith
// records a pool; Close forgets it.
var opened sync.Map

// ErrUnknownPool is returned by EnsureTables for a pool no open store
// uses.
var ErrUnknownPool = errors.New("sqlstore: the pool is not an open seqbox store's (open it with store/sqlite or store/postgres)")

// EnsureTables creates tables beside seqbox's own on db, the pool of an
// open store (Store.DB()): the statements (each idempotent, written with
// the {{SERIAL}} and {{BLOB}} placeholders) run in one transaction, as
// ddl.Ensure does, in the store's dialect, and again while the database
// is busy when the store's driver retries its opening work.
func EnsureTables(ctx context.Context, db *sql.DB, stmts ...string) error {
	return EnsureTablesAfter(ctx, db, nil, stmts...)
}

// EnsureTablesAfter is EnsureTables with a step of Go run first in its
// transaction (ddl.EnsureAfter), under the connection's own search path;
// schema tells the step seqbox's schema on PostgreSQL ("" on SQLite). On
// PostgreSQL the statements then run in seqbox's schema (Dialect.Enter):
// the tables beside seqbox's own are seqbox's too, and none lands in the
// application's schema.
func EnsureTablesAfter(ctx context.Context, db *sql.DB, before func(ctx context.Context, tx *sql.Tx, schema string) error, stmts ...string) error {
	v, ok := opened.Load(db)
	if !ok {
		return ErrUnknownPool
	}
	d := v.(Dialect)
	step := func(ctx context.Context, tx *sql.Tx) error {
		if before != nil {
			if err := before(ctx, tx, d.Schema); err != nil {
				return err
			}
		}
		if d.Enter != nil {
			return d.Enter(ctx, tx)
		}
		return nil
	}
	run := func() error { return ddl.EnsureAfter(ctx, db, d.SQL, step, stmts...) }
	if d.Retry != nil {
		return d.Retry(ctx, run)
	}
	return run()
}
