package embedded

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// On SQLite a receive commits on a pool with synchronous=NORMAL (its
// lease needs no fsync of its own), and everything else on the FULL one;
// both see one database.
func TestSQLiteLeasesCommitWithoutAnFsyncOfTheirOwn(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"), Config{Name: "relaxed"})
	require.NoError(t, err)
	defer q.Close()
	var full, normal int
	require.NoError(t, q.db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&full))
	require.NoError(t, q.leasePool().QueryRowContext(ctx, "PRAGMA synchronous").Scan(&normal))
	require.Equal(t, 2, full, "publishes, acks and nacks commit with synchronous=FULL")
	require.Equal(t, 1, normal, "receives commit with synchronous=NORMAL")

	require.NoError(t, q.Publish(ctx, []byte(`{"n":1}`)))
	ds, err := q.Receive(ctx, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	var leased int
	require.NoError(t, q.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM seqbox_queue WHERE lease <> ''").Scan(&leased))
	require.Equal(t, 1, leased, "the FULL pool sees the lease")
	require.NoError(t, ds[0].Ack(ctx))
}
