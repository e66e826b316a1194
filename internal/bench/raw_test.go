package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// The raw limit writes every row (rawRows counts them) on both drivers (the PostgreSQL one with
// its multi-row statements, several writers on shared keys), and leaves
// nothing behind.
func TestRawRowsWritesAndCleansUp(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testRawRows(t, openSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { testRawRows(t, openPostgres(t)) })
}

func testRawRows(t *testing.T, e *env) {
	ctx := context.Background()
	r, err := rawRows(ctx, e.st.DB(), e.pg, "rawtest", 1000, 7, 300, 4)
	require.NoError(t, err)
	require.Positive(t, r)
	for _, table := range []string{"bench_raw_inbox", "bench_raw_keys", "bench_raw_effects", "bench_raw_objects"} {
		var n int
		require.NoError(t, e.st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table+` WHERE run = 'rawtest'`).Scan(&n))
		require.Zero(t, n, table)
	}
}
