// Package ddl runs seqbox's DDL: the numbered migration files of the store
// and the queue (Load, Exec), and the tables that sit beside seqbox's own
// (the built-in handlers' business tables), created safely when several
// processes open one fresh database at once (Ensure).
package ddl

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/seqbox/seqbox/internal/dialect"
)

// Ensure runs the statements (each idempotent, e.g. CREATE TABLE IF NOT
// EXISTS), their {{SERIAL}} and {{BLOB}} filled for d, in one transaction
// that first takes d.SideTablesLock (PostgreSQL's advisory lock). An error
// names the statement that failed. A busy database is the caller's to
// retry (the store's Dialect.Retry).
func Ensure(ctx context.Context, db *sql.DB, d dialect.SQL, stmts ...string) error {
	return EnsureAfter(ctx, db, d, nil, stmts...)
}

// EnsureAfter is Ensure with a step of Go run first in its transaction,
// under the lock (before may be nil): a rename of tables an older seqbox
// made, say, which no statement can make conditional on both databases.
func EnsureAfter(ctx context.Context, db *sql.DB, d dialect.SQL, before func(ctx context.Context, tx *sql.Tx) error, stmts ...string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if d.SideTablesLock != "" {
		if _, err := tx.ExecContext(ctx, d.SideTablesLock); err != nil {
			return fmt.Errorf("create tables: lock: %w", err)
		}
	}
	if before != nil {
		if err := before(ctx, tx); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
	}
	for _, s := range stmts {
		if strings.TrimSpace(s) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, d.Fill(s)); err != nil {
			return fmt.Errorf("create tables: %.60s…: %w", strings.Join(strings.Fields(s), " "), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create tables: commit: %w", err)
	}
	return nil
}
