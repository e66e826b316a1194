// Package ddl creates the tables that sit beside seqbox's own (the built-in
// handlers' business tables, the queue) safely when several processes open
// one fresh database at once.
package ddl

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// advisoryLock serializes DDL across PostgreSQL sessions: CREATE TABLE IF
// NOT EXISTS is not safe when two sessions run it at the same moment.
const advisoryLock = `SELECT pg_advisory_xact_lock(7357213)`

// IsSQLite reports whether db is a SQLite pool (otherwise PostgreSQL).
func IsSQLite(db *sql.DB) bool {
	return strings.Contains(fmt.Sprintf("%T", db.Driver()), "sqlite")
}

// Serial is the column type of an auto-increment primary key on db.
func Serial(db *sql.DB) string {
	if IsSQLite(db) {
		return "INTEGER PRIMARY KEY AUTOINCREMENT"
	}
	return "BIGSERIAL PRIMARY KEY"
}

// Ensure runs the statements (each idempotent, e.g. CREATE TABLE IF NOT
// EXISTS) in one transaction, under an advisory lock on PostgreSQL. An
// error names the statement that failed.
func Ensure(ctx context.Context, db *sql.DB, stmts ...string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if !IsSQLite(db) {
		if _, err := tx.ExecContext(ctx, advisoryLock); err != nil {
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
