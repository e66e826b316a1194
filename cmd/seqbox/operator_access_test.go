package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// The operator's writing commands outside a request (purge, effects
// resolve) work on a database that holds seqbox's data, as the inspecting
// ones do: they never create a database, never migrate seqbox's tables
// into one that holds none, and never take a database the CLI made
// (replay's) for an application's, which made a second replay of the same
// file refused ("the seqbox library adopted it").
func TestOperatorWritesNeitherCreateNorAdoptSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	app := filepath.Join(dir, "app.db") // an application's file with one table of its own
	db, err := sql.Open("sqlite", app)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE crm_tasks (id TEXT PRIMARY KEY)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	before, err := os.ReadFile(app)
	require.NoError(t, err)
	testOperatorWritesNeitherCreateNorAdopt(t, map[string]string{
		filepath.Join(dir, "nothing.db"): "no such file or directory",
		app:                              "holds no seqbox data",
	}, filepath.Join(dir, "replayed.db"))
	for _, name := range []string{"nothing.db", "nothing.db-wal", "nothing.db-shm"} {
		_, err := os.Stat(filepath.Join(dir, name))
		require.ErrorIs(t, err, os.ErrNotExist, "%s was created by a refused command", name)
	}
	after, err := os.ReadFile(app)
	require.NoError(t, err)
	require.Equal(t, before, after, "the application's file was written by a refused command")
}

func TestOperatorWritesNeitherCreateNorAdoptPostgres(t *testing.T) {
	t.Parallel()
	testOperatorWritesNeitherCreateNorAdopt(t, map[string]string{pgtest.URL(t): "holds no seqbox data"}, pgtest.URL(t))
}

// testOperatorWritesNeitherCreateNorAdopt runs the operator's writes on
// each database of refused (with the refusal it must give), none of which
// holds seqbox's data, and on replayed, one a replay made.
func testOperatorWritesNeitherCreateNorAdopt(t *testing.T, refused map[string]string, replayed string) {
	writes := [][]string{
		{"purge", "--db"},
		{"effects", "resolve", "sbx-nope", "--state", "failed", "--by", "ana", "--reason", "x", "--db"},
	}
	for db, refusal := range refused {
		for _, w := range writes {
			require.Contains(t, fails(t, append(w, db)...), refusal)
			// Nothing was created: the inspecting commands still find none.
			require.Contains(t, fails(t, "dlq", "list", "--db", db), refusal)
		}
	}

	file := fixture(t, "outcomes.jsonl")
	first := ok(t, "replay", "--db", replayed, file)
	require.Regexp(t, `^purged=0 `, ok(t, "purge", "--db", replayed))
	require.Contains(t, fails(t, append(writes[1], replayed)...), "no uncertain call")
	// The database is still the CLI's own: replaying the same file again
	// applies nothing new (DESIGN.md §7), where it used to be refused.
	again := ok(t, "replay", "--db", replayed, file)
	require.NotEqual(t, first, again)
	require.NotContains(t, again, `"outcome":"applied"`)
}

// An error of several lines (pgx's connect error puts its cause on a
// line of its own) is printed on one line whole: it used to stop at the
// first line's colon, without the cause.
func TestUnreachablePostgresSaysWhy(t *testing.T) {
	t.Parallel()
	line := fails(t, "dlq", "list", "--db", "postgres://u:p@127.0.0.1:1/db?connect_timeout=5")
	require.Contains(t, line, "is unreachable")
	require.Contains(t, line, "connection refused")
}
