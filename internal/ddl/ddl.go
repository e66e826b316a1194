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

// IsSQLite reports whether db is a SQLite pool (otherwise PostgreSQL).
func IsSQLite(db *sql.DB) bool {
	return dialect.Of(db).Name == dialect.SQLite.Name
}

// Serial is the column type of an auto-increment primary key on db.
func Serial(db *sql.DB) string {
	return dialect.Of(db).Serial
}

// Ensure runs the statements (each idempotent, e.g. CREATE TABLE IF NOT
// EXISTS) in one transaction, under an advisory lock on PostgreSQL
// (dialect.SideTablesLock). An error names the statement that failed.
func Ensure(ctx context.Context, db *sql.DB, stmts ...string) error {
	return RetryBusy(ctx, func() error { return ensure(ctx, db, stmts) })
}

func ensure(ctx context.Context, db *sql.DB, stmts []string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if !IsSQLite(db) {
		if _, err := tx.ExecContext(ctx, dialect.XactLock(dialect.SideTablesLock)); err != nil {
			return fmt.Errorf("create tables: lock: %w", err)
		}
	}
	for _, s := range stmts {
		if strings.TrimSpace(s) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("create tables: %.60s…: %w", strings.Join(strings.Fields(s), " "), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create tables: commit: %w", err)
	}
	return nil
}
