package sqlstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/ddl"
	"github.com/seqbox/seqbox/internal/ddl/ddltest"
	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

// The golden files in testdata were written by the seqbox that kept its
// migrations as Go string literals: migrations.golden.json holds those
// literals, schema.*.golden what they created in a fresh database. These
// tests build databases the way that seqbox did, at every schema version,
// and check that the current code takes each to exactly the same schema.

// oldMigrations are the migration literals of the earlier seqbox.
func oldMigrations(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("testdata/migrations.golden.json")
	require.NoError(t, err)
	var m []string
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// oldDialect is what the earlier seqbox put in for the placeholders.
type oldDialect struct{ serial, blob string }

var (
	oldSQLite   = oldDialect{"INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB"}
	oldPostgres = oldDialect{"BIGSERIAL PRIMARY KEY", "BYTEA"}
)

// migrateTheOldWay runs the first n old migrations in tx as the earlier
// seqbox's migrate did (past the old literals, the migration files that
// followed them), and records schema_version n (and, from the last old
// literal's version on, the owner an adopting open records).
func migrateTheOldWay(t *testing.T, tx *sql.Tx, d oldDialect, n int) {
	t.Helper()
	ctx := context.Background()
	_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS seqbox_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)`)
	require.NoError(t, err)
	old := oldMigrations(t)
	files, err := ddl.Load(os.DirFS("."), "migrations")
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		text := files[i].SQL
		if i < len(old) {
			text = old[i]
		}
		stmt := strings.NewReplacer("{{SERIAL}}", d.serial, "{{BLOB}}", d.blob).Replace(text)
		for _, part := range strings.Split(stmt, ";") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			_, err := tx.ExecContext(ctx, part)
			require.NoError(t, err, "old migration %d", i+1)
		}
	}
	if n > 0 {
		_, err = tx.ExecContext(ctx, `INSERT INTO seqbox_meta (name, value) VALUES ('schema_version', $1)`, fmt.Sprint(n))
		require.NoError(t, err)
	}
	if n >= len(old) {
		_, err = tx.ExecContext(ctx, `INSERT INTO seqbox_meta (name, value) VALUES ('owner', 'application')`)
		require.NoError(t, err)
	}
}

// seedV3 writes, at schema version 3, rows that migrations 4, 5 and 11
// rewrite.
func seedV3(t *testing.T, tx *sql.Tx) {
	t.Helper()
	for _, q := range []string{
		`INSERT INTO seqbox_parked (consumer, source, id, partitionkey, reason, envelope, payload_hash, parked_at)
			VALUES ('c', 's', '1', 'k', 'collision', 'e', 'h', 1), ('c', 's', '1', 'k', 'collision', 'e', 'h', 2),
			('c', 's', '1', 'k', 'collision', 'e', 'h2', 3), ('c', 's', '2', 'k', 'gap', 'e', 'h', 4)`,
		`INSERT INTO seqbox_dlq (consumer, envelope, reason, attempts, dead_at, resolution)
			VALUES ('c', 'e', 'r', 1, 1, ''), ('c', 'e', 'r', 1, 1, 'skipped by op'),
			('c', 'e', 'r', 1, 1, 'redrive_failed'), ('c', 'e', 'r', 1, 1, 'redriven at 5')`,
		`INSERT INTO seqbox_inbox (consumer, source, id, payload_hash, event_type, outcome, received_at, retention_until)
			VALUES ('c', 's', 'p', 'h', 't', 'pending', 1, 2), ('c', 's', 'a', 'h', 't', 'applied', 1, 2)`,
	} {
		_, err := tx.Exec(q)
		require.NoError(t, err)
	}
}

// seededAfter is what the seeded rows are once migrated to the latest
// version: the duplicate collision is gone, every DLQ row has its state,
// and an identity left 'pending' has no outcome yet (empty).
const seededAfter = "dlq 1 '' open\ndlq 2 'skipped by op' skipped\ndlq 3 'redrive_failed' redrive_failed\ndlq 4 'redriven at 5' redriven\n" +
	"inbox a 'applied'\ninbox p ''\n" +
	"parked 1 collision h\nparked 3 collision h2\nparked 4 gap h\n"

func seeded(t *testing.T, db *sql.DB) string {
	t.Helper()
	s, err := ddltest.Rows(context.Background(), db, `SELECT 'parked ' || seq || ' ' || reason || ' ' || payload_hash FROM seqbox_parked
		UNION ALL SELECT 'dlq ' || seq || ' ''' || resolution || ''' ' || state FROM seqbox_dlq
		UNION ALL SELECT 'inbox ' || id || ' ''' || outcome || '''' FROM seqbox_inbox ORDER BY 1`)
	require.NoError(t, err)
	return s
}

// meta describes seqbox_meta, the version bookkeeping.
func meta(t *testing.T, db *sql.DB) string {
	t.Helper()
	s, err := ddltest.Rows(context.Background(), db, `SELECT name || '=' || value FROM seqbox_meta ORDER BY name`)
	require.NoError(t, err)
	return s
}

func TestSQLiteSchemaAsBefore(t *testing.T) {
	ctx := context.Background()
	for n := 0; n <= len(oldMigrations(t)); n++ {
		t.Run(fmt.Sprintf("from_v%d", n), func(t *testing.T) {
			path, _ := oldSQLiteDB(t, n, func(tx *sql.Tx) {
				if n == 3 {
					seedV3(t, tx)
				}
			})
			s, err := sqlite.Open(ctx, path)
			require.NoError(t, err)
			db := s.(*sqlstore.Store).DB()
			dump, err := ddltest.SQLite(ctx, db)
			require.NoError(t, err)
			ddltest.Golden(t, "testdata/schema.sqlite.golden", dump)
			require.Equal(t, latestMeta, meta(t, db))
			if n == 3 {
				require.Equal(t, seededAfter, seeded(t, db))
			}
			require.NoError(t, s.Close())
		})
	}
}

// oldSQLiteDB makes a SQLite file migrated the old way to version n (none
// when 0), with seed run in the migration's transaction, and returns its
// path and a pool on it, closed when the test ends.
func oldSQLiteDB(t *testing.T, n int, seed func(tx *sql.Tx)) (path string, pool *sql.DB) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "old.db")
	pool, err := sqlitedb.Open(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { pool.Close() })
	tx, err := pool.Begin()
	require.NoError(t, err)
	if n > 0 {
		migrateTheOldWay(t, tx, oldSQLite, n)
	}
	seed(tx)
	require.NoError(t, tx.Commit())
	return path, pool
}

// oldPostgresDB makes a database of its own migrated the old way to
// version n (none when 0), with seed run in the migration's transaction,
// and returns its URL, seqbox's schema and a pool on it, closed when the
// test ends.
func oldPostgresDB(t *testing.T, n int, seed func(tx *sql.Tx)) (u, schema string, pool *sql.DB) {
	t.Helper()
	ctx := context.Background()
	u = pgtest.URL(t)
	schema, err := pgdb.SchemaOf(u)
	require.NoError(t, err)
	pool, err = pgdb.Open(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() { pool.Close() })
	if n > 0 {
		tx, err := pool.Begin()
		require.NoError(t, err)
		require.NoError(t, pgdb.EnterSchema(ctx, tx, schema))
		migrateTheOldWay(t, tx, oldPostgres, n)
		seed(tx)
		require.NoError(t, tx.Commit())
	}
	return u, schema, pool
}

func TestPostgresSchemaAsBefore(t *testing.T) {
	ctx := context.Background()
	for n := 0; n <= len(oldMigrations(t)); n++ {
		t.Run(fmt.Sprintf("from_v%d", n), func(t *testing.T) {
			u, schema, pool := oldPostgresDB(t, n, func(tx *sql.Tx) {
				if n == 3 {
					seedV3(t, tx)
				}
			})
			s, err := postgres.Open(ctx, u)
			require.NoError(t, err)
			defer s.Close()
			dump, err := ddltest.Postgres(ctx, pool, schema)
			require.NoError(t, err)
			ddltest.Golden(t, "testdata/schema.postgres.golden", dump)
			require.Equal(t, latestMeta, meta(t, pool))
			if n == 3 {
				require.Equal(t, seededAfter, seeded(t, pool))
			}
		})
	}
}

// latestMeta is the metadata of a database at the latest schema version.
var latestMeta = fmt.Sprintf("owner=application\nschema_version=%d\n", sqlstore.LatestSchemaVersion)
