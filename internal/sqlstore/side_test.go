package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

// EnsureTables creates side tables in the dialect of the store that
// opened the pool, and refuses a pool no open store uses.
func TestEnsureTablesNeedsAnOpenStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "side.db")
	st, err := sqlite.Open(ctx, path)
	require.NoError(t, err)
	require.NoError(t, sqlstore.EnsureTables(ctx, st.DB(), `CREATE TABLE IF NOT EXISTS side_t (n {{SERIAL}}, b {{BLOB}})`))
	var n int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'side_t'`).Scan(&n))
	require.Equal(t, 1, n)
	require.NoError(t, st.Close())
	require.ErrorIs(t, sqlstore.EnsureTables(ctx, st.DB(), `CREATE TABLE x (n INTEGER)`), sqlstore.ErrUnknownPool, "closed")

	raw, err := sqlitedb.Open(ctx, path)
	require.NoError(t, err)
	defer raw.Close()
	require.ErrorIs(t, sqlstore.EnsureTables(ctx, raw, `CREATE TABLE x (n INTEGER)`), sqlstore.ErrUnknownPool)
}
