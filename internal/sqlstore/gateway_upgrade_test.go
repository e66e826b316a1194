package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/seqbox/seqbox/internal/ddl/ddltest"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

// The identities of the rows the earlier serve wrote: its hash of
// (consumer, source, id), as the store's Gateway* methods key them.
const (
	servedEnvelope  = "2a060b845e5cb6cbe4a7e30b7d16c8b4d834e7a6bae6a01c1ddae02082b1c43d" // gw, s, 1
	servedTombstone = "580da1aeb984ccac97ec6bfdecd66c7316935e9c8882dc1835cfc856958062f4" // gw, s, 2
)

// servedVersion is the schema version of the databases seqbox serve made
// its own gateway tables in: the last before migration 10 took them over.
const servedVersion = 9

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
	`INSERT INTO gateway_envelopes (ident, consumer, source, id, envelope, applied_at) VALUES ('` + servedEnvelope + `', 'gw', 's', '1', '{}', 7)`,
	`INSERT INTO gateway_tombstones (ident, consumer, purged_at) VALUES ('` + servedTombstone + `', 'gw', 8)`,
}

// serveTheOldWay creates the gateway's tables, with a row each, on q (a
// pool, or a transaction) as the earlier seqbox serve did.
func serveTheOldWay(t *testing.T, q interface {
	Exec(query string, args ...any) (sql.Result, error)
},
) {
	t.Helper()
	for _, stmt := range servedGatewaySchema {
		_, err := q.Exec(stmt)
		require.NoError(t, err)
	}
}

// requireGatewayMoved checks that the store, at the latest schema
// version, holds the rows the earlier serve wrote in its own gateway
// tables, and that left names what is left of serve's tables (nothing,
// once they are taken over).
func requireGatewayMoved(t *testing.T, st store.Store, left func() string) {
	t.Helper()
	require.Equal(t, latestMeta, meta(t, st.DB()))
	rows, err := ddltest.Rows(context.Background(), st.DB(),
		`SELECT 'envelope ' || ident || ' ' || consumer || ' ' || source || ' ' || id || ' ' || envelope || ' ' || applied_at || ' [' || businesskey || ']'
			FROM seqbox_gateway_envelopes
		UNION ALL SELECT 'tombstone ' || ident || ' ' || consumer || ' ' || purged_at FROM seqbox_gateway_tombstones ORDER BY 1`)
	require.NoError(t, err)
	require.Equal(t, "envelope "+servedEnvelope+" gw s 1 {} 7 []\ntombstone "+servedTombstone+" gw 8\n", rows)
	require.Empty(t, left(), "serve's gateway tables are gone")

	// The store's Gateway* methods reach the moved rows.
	ctx := context.Background()
	env, err := st.Executor().GatewayEnvelopeGet(ctx, store.MessageRef{Consumer: "gw", Source: "s", ID: "1"})
	require.NoError(t, err)
	require.Equal(t, "{}", string(env))
	n, err := st.Executor().GatewayTombstoneCount(ctx, "gw")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

// sqliteObjects describes, byte for byte, the objects of a SQLite file
// whose names match like.
func sqliteObjects(t *testing.T, db *sql.DB, like string) string {
	t.Helper()
	s, err := ddltest.Rows(context.Background(), db, `SELECT type || ' ' || name || ' on ' || tbl_name || ': ' || COALESCE(sql, '-')
		FROM sqlite_master WHERE name LIKE $1 ORDER BY type, name`, like)
	require.NoError(t, err)
	return s
}

// A database at schema version 9 whose gateway tables seqbox serve made
// at run time migrates to 10: their rows move into seqbox's tables and
// serve's tables are dropped, in the migration's transaction.
func TestSQLiteGatewayTablesOfAnEarlierServe(t *testing.T) {
	path, pool := oldSQLiteDB(t, servedVersion, func(*sql.Tx) {})
	serveTheOldWay(t, pool)

	st, err := sqlite.Open(context.Background(), path)
	require.NoError(t, err)
	defer st.Close()
	requireGatewayMoved(t, st, func() string { return sqliteObjects(t, st.DB(), "gateway%") })
}

// The same on PostgreSQL, where the earlier serve created them on the
// pool, in the first schema of the application's search_path, or in
// seqbox's own schema when that was the first one that existed.
func TestPostgresGatewayTablesOfAnEarlierServe(t *testing.T) {
	for _, inSeqboxSchema := range []bool{false, true} {
		t.Run(fmt.Sprintf("in_seqbox_schema=%v", inSeqboxSchema), func(t *testing.T) {
			ctx := context.Background()
			u, schema, pool := oldPostgresDB(t, servedVersion, func(tx *sql.Tx) {
				if inSeqboxSchema {
					serveTheOldWay(t, tx) // the transaction's search_path is seqbox's schema
				}
			})
			var app string
			require.NoError(t, pool.QueryRow(`SELECT current_schema()`).Scan(&app))
			require.NotEqual(t, schema, app)
			if !inSeqboxSchema {
				serveTheOldWay(t, pool)
			}

			st, err := postgres.Open(ctx, u)
			require.NoError(t, err)
			defer st.Close()
			requireGatewayMoved(t, st, func() string {
				s, err := ddltest.Rows(ctx, pool, `SELECT n.nspname || '.' || c.relname FROM pg_catalog.pg_class c
					JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
					WHERE n.nspname IN ($1, $2) AND c.relname LIKE 'gateway%' ORDER BY 1`, app, schema)
				require.NoError(t, err)
				return s
			})
		})
	}
}

// appGatewayCase is an application's database with tables named like
// seqbox serve's, which are not serve's and stay as they are.
type appGatewayCase struct {
	name string
	// version is seqbox's schema version in the database (0: none yet).
	version int
	// stmts create the application's tables, with rows.
	stmts []string
}

var appGatewayCases = []appGatewayCase{
	{"unrelated_gateway_envelopes_at_v9", servedVersion, []string{
		`CREATE TABLE gateway_envelopes (id INTEGER PRIMARY KEY, gateway TEXT NOT NULL, payload TEXT)`,
		`CREATE INDEX gateway_envelopes_by_gateway ON gateway_envelopes (gateway)`,
		`INSERT INTO gateway_envelopes (id, gateway, payload) VALUES (1, 'stripe', '{"a":1}'), (2, 'adyen', NULL)`,
	}},
	{"serve_shaped_tables_never_migrated", 0, servedGatewaySchema},
	{"only_one_serve_shaped_table_at_v9", servedVersion, append(servedGatewaySchema[:3:3],
		`CREATE TABLE gateway_tombstones (ident TEXT PRIMARY KEY, consumer TEXT NOT NULL, purged_at TEXT NOT NULL)`,
		`INSERT INTO gateway_envelopes (ident, consumer, source, id, envelope, applied_at) VALUES ('x', 'app', 's', '1', '{}', 7)`,
		`INSERT INTO gateway_tombstones (ident, consumer, purged_at) VALUES ('y', 'app', 'yesterday')`,
	)},
}

// tableRows lists a table's rows, every column, in the order of its first
// column.
func tableRows(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	rows, err := db.Query(`SELECT * FROM ` + table + ` ORDER BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		out = append(out, fmt.Sprintf("%q", vals))
	}
	require.NoError(t, rows.Err())
	return out
}

// gatewayRows lists the rows of whichever of gateway_envelopes and
// gateway_tombstones exist, as tables reports them.
func gatewayRows(t *testing.T, db *sql.DB, exists func(table string) bool) []string {
	t.Helper()
	var out []string
	for _, table := range []string{"gateway_envelopes", "gateway_tombstones"} {
		if exists(table) {
			for _, r := range tableRows(t, db, table) {
				out = append(out, table+" "+r)
			}
		}
	}
	return out
}

// An application's tables named gateway_envelopes or gateway_tombstones
// that are not exactly seqbox serve's pair, or that sit in a database
// seqbox never migrated, are left byte for byte, rows and schema, and the
// migration succeeds; seqbox's own gateway tables start empty.
func TestSQLiteApplicationGatewayTablesUntouched(t *testing.T) {
	for _, c := range appGatewayCases {
		t.Run(c.name, func(t *testing.T) {
			path, db := oldSQLiteDB(t, c.version, func(tx *sql.Tx) {
				for _, q := range c.stmts {
					_, err := tx.Exec(q)
					require.NoError(t, err, q)
				}
			})
			exists := func(db *sql.DB) func(string) bool {
				return func(table string) bool {
					var n int
					require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1`, table).Scan(&n))
					return n == 1
				}
			}
			schemaBefore := sqliteObjects(t, db, "gateway%")
			rowsBefore := gatewayRows(t, db, exists(db))
			require.NotEmpty(t, rowsBefore)

			st, err := sqlite.Open(context.Background(), path)
			require.NoError(t, err)
			defer st.Close()
			require.Equal(t, latestMeta, meta(t, st.DB()))
			require.Equal(t, schemaBefore, sqliteObjects(t, st.DB(), "gateway%"))
			require.Equal(t, rowsBefore, gatewayRows(t, st.DB(), exists(st.DB())))
			requireSeqboxGatewayEmpty(t, st.DB())
		})
	}
}

// The same on PostgreSQL, the application's tables in its own schema.
func TestPostgresApplicationGatewayTablesUntouched(t *testing.T) {
	for _, c := range appGatewayCases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			u, schema, pool := oldPostgresDB(t, c.version, func(*sql.Tx) {})
			var app string
			require.NoError(t, pool.QueryRow(`SELECT current_schema()`).Scan(&app))
			require.NotEqual(t, schema, app)
			for _, q := range c.stmts {
				_, err := pool.Exec(q)
				require.NoError(t, err, q)
			}
			exists := func(table string) bool {
				var ok bool
				require.NoError(t, pool.QueryRow(`SELECT to_regclass($1) IS NOT NULL`, app+"."+table).Scan(&ok))
				return ok
			}
			dump := func() string {
				s, err := ddltest.Postgres(ctx, pool, app)
				require.NoError(t, err)
				return s
			}
			schemaBefore := dump()
			rowsBefore := gatewayRows(t, pool, exists)
			require.NotEmpty(t, rowsBefore)

			st, err := postgres.Open(ctx, u)
			require.NoError(t, err)
			defer st.Close()
			require.Equal(t, latestMeta, meta(t, pool))
			require.Equal(t, schemaBefore, dump())
			require.Equal(t, rowsBefore, gatewayRows(t, pool, exists))
			requireSeqboxGatewayEmpty(t, st.DB())
		})
	}
}

// requireSeqboxGatewayEmpty checks that seqbox's gateway tables exist
// and took no rows.
func requireSeqboxGatewayEmpty(t *testing.T, db *sql.DB) {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(`SELECT (SELECT COUNT(*) FROM seqbox_gateway_envelopes) + (SELECT COUNT(*) FROM seqbox_gateway_tombstones)`).Scan(&n))
	require.Zero(t, n)
}
