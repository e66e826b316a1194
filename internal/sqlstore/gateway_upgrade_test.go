package sqlstore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

// servedGatewaySchema is what seqbox serve ran on the store's pool, at
// every start, before its tables became migration 10.
var servedGatewaySchema = []string{
	`CREATE TABLE IF NOT EXISTS gateway_envelopes (
		ident TEXT PRIMARY KEY, consumer TEXT NOT NULL, source TEXT NOT NULL, id TEXT NOT NULL,
		envelope TEXT NOT NULL, applied_at BIGINT NOT NULL, businesskey TEXT NOT NULL DEFAULT '')`,
	`CREATE INDEX IF NOT EXISTS gateway_envelopes_applied ON gateway_envelopes (consumer, applied_at)`,
	`CREATE INDEX IF NOT EXISTS gateway_envelopes_businesskey ON gateway_envelopes (consumer, businesskey)`,
	`CREATE TABLE IF NOT EXISTS gateway_tombstones (
		ident TEXT PRIMARY KEY, consumer TEXT NOT NULL, purged_at BIGINT NOT NULL)`,
	`CREATE INDEX IF NOT EXISTS gateway_tombstones_purged ON gateway_tombstones (consumer, purged_at)`,
	`INSERT INTO gateway_envelopes (ident, consumer, source, id, envelope, applied_at) VALUES ('i1', 'gw', 's', '1', '{}', 7)`,
	`INSERT INTO gateway_tombstones (ident, consumer, purged_at) VALUES ('i2', 'gw', 8)`,
}

// serveTheOldWay creates the gateway's tables, with a row each, on pool
// as the earlier seqbox serve did.
func serveTheOldWay(t *testing.T, pool *sql.DB) {
	t.Helper()
	for _, q := range servedGatewaySchema {
		_, err := pool.Exec(q)
		require.NoError(t, err)
	}
}

// requireGatewayKept checks that the store reaches the rows the earlier
// serve wrote, at the latest schema version.
func requireGatewayKept(t *testing.T, st store.Store) {
	t.Helper()
	require.Equal(t, "owner=application\nschema_version=10\n", meta(t, st.DB()))
	var env string
	var purged int64
	require.NoError(t, st.DB().QueryRow(`SELECT envelope FROM gateway_envelopes WHERE ident = 'i1'`).Scan(&env))
	require.NoError(t, st.DB().QueryRow(`SELECT purged_at FROM gateway_tombstones WHERE ident = 'i2'`).Scan(&purged))
	require.Equal(t, "{}", env)
	require.EqualValues(t, 8, purged)
}

// A database at schema version 9 whose gateway tables seqbox serve made
// at run time migrates to 10 and keeps them, with their rows.
func TestSQLiteGatewayTablesOfAnEarlierServe(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sqlitedb.Open(ctx, path)
	require.NoError(t, err)
	tx, err := db.Begin()
	require.NoError(t, err)
	migrateTheOldWay(t, tx, oldSQLite, len(oldMigrations(t)))
	require.NoError(t, tx.Commit())
	serveTheOldWay(t, db)
	require.NoError(t, db.Close())

	st, err := sqlite.Open(ctx, path)
	require.NoError(t, err)
	defer st.Close()
	requireGatewayKept(t, st)
}

// The same on PostgreSQL, where the earlier serve created them on the
// pool, in the first schema of the application's search_path.
func TestPostgresGatewayTablesOfAnEarlierServe(t *testing.T) {
	u, _, pool := oldPostgresDB(t, len(oldMigrations(t)), func(*sql.Tx) {})
	serveTheOldWay(t, pool)

	st, err := postgres.Open(context.Background(), u)
	require.NoError(t, err)
	defer st.Close()
	requireGatewayKept(t, st)
}
