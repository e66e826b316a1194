// Package ddltest describes what seqbox's DDL left in a database, as text a
// test compares with a golden copy: it proves a change to how migrations
// are stored or run leaves existing and new databases exactly as they were.
package ddltest

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
)

// UpdateEnv names the variable that, set to 1, makes Golden rewrite the
// golden files instead of comparing with them.
const UpdateEnv = "SEQBOX_UPDATE_GOLDEN"

// SQLite describes a SQLite database's schema: every object of
// sqlite_master with the text SQLite keeps for it, byte for byte.
func SQLite(ctx context.Context, db *sql.DB) (string, error) {
	return lines(ctx, db, `SELECT type || ' ' || name || ' on ' || tbl_name || ': ' || COALESCE(sql, '-')
		FROM sqlite_master ORDER BY type, name`)
}

// Postgres describes the tables, columns, indexes, constraints and
// sequences in schema, with the schema's name written as $SCHEMA.
func Postgres(ctx context.Context, db *sql.DB, schema string) (string, error) {
	s, err := lines(ctx, db, `SELECT 'column ' || table_name || '.' || column_name || ' #' || ordinal_position || ' ' ||
			data_type || ' nullable=' || is_nullable || ' default=' || COALESCE(column_default, '-')
		FROM information_schema.columns WHERE table_schema = $1
		UNION ALL
		SELECT 'index ' || indexname || ': ' || indexdef FROM pg_catalog.pg_indexes WHERE schemaname = $1
		UNION ALL
		SELECT 'constraint ' || c.relname || '.' || k.conname || ': ' || pg_catalog.pg_get_constraintdef(k.oid)
		FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class c ON c.oid = k.conrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = k.connamespace WHERE n.nspname = $1
		UNION ALL
		SELECT 'sequence ' || sequencename || ' ' || data_type::text || ' start=' || start_value || ' by=' || increment_by
		FROM pg_catalog.pg_sequences WHERE schemaname = $1
		ORDER BY 1`, schema)
	return strings.ReplaceAll(s, schema, "$SCHEMA"), err
}

// Querier runs a query: a pool, one of its connections, a transaction.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Rows runs query and returns its one text column, a line per row.
func Rows(ctx context.Context, db Querier, query string, args ...any) (string, error) {
	return lines(ctx, db, query, args...)
}

// SQLitePlan is SQLite's query plan for query with args, a line per step
// (EXPLAIN QUERY PLAN's detail column).
func SQLitePlan(ctx context.Context, db Querier, query string, args ...any) (string, error) {
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return "", err
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "\n"), rows.Err()
}

func lines(ctx context.Context, db Querier, query string, args ...any) (string, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return "", err
		}
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.String(), rows.Err()
}

// Golden compares got with the file at path, or writes it there when
// UpdateEnv is 1.
func Golden(t testing.TB, path, got string) {
	t.Helper()
	if os.Getenv(UpdateEnv) == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s: %v (rerun with "+UpdateEnv+"=1 to create it)", path, err)
	}
	if string(want) != got {
		t.Fatalf("schema differs from %s:\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
