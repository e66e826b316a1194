// Package pgtest gives tests a fresh PostgreSQL schema on the server named
// by SEQBOX_TEST_POSTGRES_URL. With CI=true and no server, tests fail: they
// never skip in CI.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// EnvURL names the variable that points the tests at a PostgreSQL server.
const EnvURL = "SEQBOX_TEST_POSTGRES_URL"

// BaseURL returns the server URL, failing the test in CI when it is unset
// and skipping it elsewhere (with the way to enable it).
func BaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: PostgreSQL tests must run in CI (.ci/postgres-start starts a server)", EnvURL)
		}
		t.Skipf("%s is not set; run `eval \"$(.ci/postgres-start)\"` or point it at your own PostgreSQL", EnvURL)
	}
	return u
}

// URL creates a schema of its own for this test, drops it when the test
// ends, and returns a URL whose search_path is that schema and whose
// seqbox_schema is a second one of its own (seqbox's objects), so tests
// never share seqbox's default schema.
func URL(t testing.TB) string {
	t.Helper()
	base := BaseURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_, _ = admin.ExecContext(context.Background(), "DROP SCHEMA IF EXISTS "+schema+"_seqbox CASCADE")
		admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("seqbox_schema", schema+"_seqbox")
	u.RawQuery = q.Encode()
	return u.String()
}
