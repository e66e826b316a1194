package embedded_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/ddl/ddltest"
	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/seqbox/seqbox/transport/embedded"
	"github.com/stretchr/testify/require"
)

// The golden files in testdata were written by the seqbox that kept the
// queue's schema as a Go string literal: queue.golden.json holds that
// literal, schema.*.golden what it created, with the group column and
// index added since (the index now holds grouped messages only), and on
// SQLite the mark of a message behind its group's head, its triggers and
// the order index that walks the heads (heads.go). A queue
// opened by the current code, fresh or on a file an earlier seqbox made,
// ends up the same.

// How a test's database starts: empty, with the queue the string
// literal made, or with that queue after the earlier seqbox added message
// groups (its group index held every row).
const (
	fresh = iota
	literal
	fullGroupIndex
)

// createTheOldWay runs the earlier seqbox's queue DDL in tx, and with
// groups its message group column and index.
func createTheOldWay(t *testing.T, tx *sql.Tx, serial, blob string, groups bool) {
	t.Helper()
	b, err := os.ReadFile("testdata/queue.golden.json")
	require.NoError(t, err)
	var old []string
	require.NoError(t, json.Unmarshal(b, &old))
	ddl := strings.NewReplacer("{{SERIAL}}", serial, "{{BLOB}}", blob).Replace(old[0])
	stmts := strings.Split(ddl, ";")
	if groups {
		stmts = append(stmts, `ALTER TABLE seqbox_queue ADD COLUMN msg_group TEXT NOT NULL DEFAULT ''`,
			`CREATE INDEX seqbox_queue_group ON seqbox_queue (queue, msg_group, seq)`)
	}
	for _, stmt := range stmts {
		_, err := tx.Exec(stmt)
		require.NoError(t, err)
	}
}

func TestSQLiteQueueSchemaAsBefore(t *testing.T) {
	ctx := context.Background()
	for _, existing := range []int{fresh, literal, fullGroupIndex} {
		path := filepath.Join(t.TempDir(), "q.db")
		db, err := sqlitedb.Open(ctx, path)
		require.NoError(t, err)
		if existing != fresh {
			tx, err := db.Begin()
			require.NoError(t, err)
			createTheOldWay(t, tx, "INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB", existing == fullGroupIndex)
			require.NoError(t, tx.Commit())
		}
		q, err := embedded.Open(ctx, path, embedded.Config{})
		require.NoError(t, err)
		require.NoError(t, q.Close())
		dump, err := ddltest.SQLite(ctx, db)
		require.NoError(t, err)
		require.NoError(t, db.Close())
		ddltest.Golden(t, "testdata/schema.sqlite.golden", dump)
	}
}

func TestPostgresQueueSchemaAsBefore(t *testing.T) {
	ctx := context.Background()
	for _, existing := range []int{fresh, literal, fullGroupIndex} {
		u := pgtest.URL(t)
		schema, err := pgdb.SchemaOf(u)
		require.NoError(t, err)
		db, err := pgdb.Open(ctx, u)
		require.NoError(t, err)
		if existing != fresh {
			tx, err := db.Begin()
			require.NoError(t, err)
			require.NoError(t, pgdb.EnterSchema(ctx, tx, schema))
			createTheOldWay(t, tx, "BIGSERIAL PRIMARY KEY", "BYTEA", existing == fullGroupIndex)
			require.NoError(t, tx.Commit())
		}
		q, err := embedded.Open(ctx, u, embedded.Config{})
		require.NoError(t, err)
		require.NoError(t, q.Close())
		dump, err := ddltest.Postgres(ctx, db, schema)
		require.NoError(t, err)
		require.NoError(t, db.Close())
		ddltest.Golden(t, "testdata/schema.postgres.golden", dump)
	}
}
