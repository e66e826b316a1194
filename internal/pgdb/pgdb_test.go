package pgdb_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/stretchr/testify/require"
)

func TestLocate(t *testing.T) {
	for _, c := range []struct{ in, schema, url, wantSchema, err string }{
		{in: "postgres://h/db", url: "postgres://h/db", wantSchema: "seqbox"},
		{in: "postgres://h/db?sslmode=disable&seqbox_schema=jobs", url: "postgres://h/db?sslmode=disable", wantSchema: "jobs"},
		{in: "postgres://h/db?seqbox_schema=jobs&sslmode=disable", url: "postgres://h/db?sslmode=disable", wantSchema: "jobs"},
		{in: "postgres://h/db?seqbox_schema=jobs", url: "postgres://h/db", wantSchema: "jobs"},
		{in: "postgres://h1:5432,h2:5433/db?seqbox_schema=jobs&target_session_attrs=read-write",
			url: "postgres://h1:5432,h2:5433/db?target_session_attrs=read-write", wantSchema: "jobs"},
		{in: "postgres://h/db", schema: "jobs", url: "postgres://h/db", wantSchema: "jobs"},
		{in: "postgres://h/db?seqbox_schema=jobs", schema: "jobs", url: "postgres://h/db", wantSchema: "jobs"},
		{in: "postgres://h/db?seqbox_schema=jobs", schema: "other", err: "seqbox_schema=jobs"},
		{in: "postgres://h/db?seqbox_schema=Jobs", err: "plain identifier"},
		{in: "postgres://h/db", schema: "pg_jobs", err: "reserved"},
		{in: "postgres://h/db", schema: `x"; DROP TABLE t; --`, err: "plain identifier"},
		// Given but empty: a mistake in the URL, not a request for the
		// default schema. Given twice: the last one counts.
		{in: "postgres://h/db?seqbox_schema=", err: "seqbox_schema is empty"},
		{in: "postgres://h/db?seqbox_schema", err: "seqbox_schema is empty"},
		{in: "postgres://h/db?seqbox_schema=a&seqbox_schema=b", url: "postgres://h/db", wantSchema: "b"},
	} {
		got, err := pgdb.Locate(c.in, c.schema)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		require.Equal(t, c.url, got.URL, c.in)
		require.Equal(t, c.wantSchema, got.Schema, c.in)
	}
	got, err := pgdb.Locate("postgres://u:secret@h/db", "")
	require.NoError(t, err)
	require.NotContains(t, got.Where, "secret")
	require.Contains(t, got.Where, "(schema seqbox)")
}

// What a component that keeps its own table beside the store (the
// embedded queue) does: DDL in a transaction that entered seqbox's schema,
// DML through the pool with unqualified names.
func TestEnterSchemaAndSearchPath(t *testing.T) {
	ctx := context.Background()
	base := pgtest.URL(t) // search_path = a schema of this test's own
	u, err := url.Parse(base)
	require.NoError(t, err)
	appSchema := u.Query().Get("search_path")
	seqboxSchema := appSchema + "_sb"
	q := u.Query()
	q.Set(pgdb.SchemaParam, seqboxSchema)
	u.RawQuery = q.Encode()

	db, err := pgdb.Open(ctx, u.String())
	require.NoError(t, err)
	defer db.Close()
	t.Cleanup(func() { _, _ = db.Exec(`DROP SCHEMA IF EXISTS ` + seqboxSchema + ` CASCADE`) })

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, pgdb.EnterSchema(ctx, tx, seqboxSchema))
	_, err = tx.Exec(`CREATE TABLE IF NOT EXISTS seqbox_queue (seq BIGSERIAL PRIMARY KEY, body BYTEA)`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())

	// The application's unqualified DDL still lands in its schema.
	_, err = db.Exec(`CREATE TABLE app_things (id INT)`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO seqbox_queue (body) VALUES ('x')`)
	require.NoError(t, err)

	where := func(rel string) string {
		var ns string
		require.NoError(t, db.QueryRow(`SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relname = $1 AND n.nspname IN ($2, $3)`, rel, appSchema, seqboxSchema).Scan(&ns))
		return ns
	}
	require.Equal(t, seqboxSchema, where("seqbox_queue"))
	require.Equal(t, appSchema, where("app_things"))
	var path string
	require.NoError(t, db.QueryRow(`SHOW search_path`).Scan(&path))
	require.True(t, strings.HasPrefix(path, appSchema+", "), path)
	require.True(t, strings.HasSuffix(path, `"`+seqboxSchema+`"`), path)
}

// A process frozen inside a transaction (SIGSTOP, a debugger, a swapped
// out VM) held its advisory and row locks for as long as it stayed
// frozen, and every other process's work on those keys waited behind it
// with nothing to show or end it (an attacker's two gateways). seqbox's
// connections end such a transaction after IdleInTransactionTimeout; a
// URL that names the setting keeps its own.
func TestAFrozenTransactionIsEndedByTheServer(t *testing.T) {
	base := pgtest.URL(t)
	show := func(raw string) string {
		t.Helper()
		db, err := pgdb.Open(context.Background(), raw)
		require.NoError(t, err)
		defer db.Close()
		var v string
		require.NoError(t, db.QueryRow(`SHOW idle_in_transaction_session_timeout`).Scan(&v))
		return v
	}
	require.Equal(t, "5min", show(base))
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	require.Equal(t, "2s", show(base+sep+"idle_in_transaction_session_timeout=2s"))

	// The server ends it: a transaction idle past the setting loses its
	// connection, and its lock is free for another.
	db, err := pgdb.Open(context.Background(), base+sep+"idle_in_transaction_session_timeout=100ms")
	require.NoError(t, err)
	defer db.Close()
	tx, err := db.Begin()
	require.NoError(t, err)
	_, err = tx.Exec(`SELECT pg_advisory_xact_lock(424242)`)
	require.NoError(t, err)
	other, err := pgdb.Open(context.Background(), base)
	require.NoError(t, err)
	defer other.Close()
	// Blocks until the server ends the idle transaction.
	otx, err := other.Begin()
	require.NoError(t, err)
	_, err = otx.Exec(`SELECT pg_advisory_xact_lock(424242)`)
	require.NoError(t, err)
	require.NoError(t, otx.Commit())
	require.Error(t, tx.Commit(), "the frozen transaction's connection was ended")
}
