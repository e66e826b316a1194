package sqlitedb

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A recording counts each statement a writer pool runs, inside a
// transaction and outside, with BEGIN and COMMIT, and nothing once
// stopped; one recording runs at a time.
func TestRecordStatementsCountsWhatTheWriterRan(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE t (x INTEGER)`)
	require.NoError(t, err)

	stop, ok := RecordStatements()
	require.True(t, ok)
	_, again := RecordStatements()
	require.False(t, again, "a second recording while one runs")
	insert, err := db.Prepare(`INSERT INTO t   (x)
		VALUES (?)`)
	require.NoError(t, err)
	defer insert.Close()
	for i := range 3 {
		_, err = insert.Exec(i)
		require.NoError(t, err)
	}
	tx, err := db.Begin()
	require.NoError(t, err)
	_, err = tx.Exec(`INSERT INTO t (x) VALUES (?)`, 9)
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n))
	require.NoError(t, tx.Commit())
	got := stop()

	_, err = db.Exec(`INSERT INTO t (x) VALUES (?)`, 10) // after the stop: not counted
	require.NoError(t, err)
	counts := map[string]int64{}
	for _, s := range got {
		counts[s.Query] = s.Count
		require.Positive(t, s.Total, s.Query)
	}
	require.Equal(t, map[string]int64{
		"INSERT INTO t (x) VALUES (?)": 4, // folded white space: the prepared one and the transaction's are one
		"SELECT COUNT(*) FROM t":       1,
		"BEGIN":                        1,
		"COMMIT":                       1,
	}, counts)
	for i := 1; i < len(got); i++ {
		require.GreaterOrEqual(t, got[i-1].Total, got[i].Total, "the longest in all first")
	}

	stop, ok = RecordStatements()
	require.True(t, ok, "a new recording once the last stopped")
	require.Empty(t, stop())
}
