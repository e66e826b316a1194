package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/outbox"
	"github.com/stretchr/testify/require"
)

// On PostgreSQL, transactions emit side by side (workers, processes), and
// the order of their seqs need not be the order they commit in. A key's
// events are published in seq order, so a transaction emitting for a key
// waits for another that emitted for it first to end: the lower seq is
// committed (or gone) before a higher one of its key exists. Before, a
// later transaction's event (seq 2) committed and was published before
// the earlier one (seq 1), which downstream then dropped as stale.
func TestEmitsOfOneKeyCommitInSeqOrderOnPostgres(t *testing.T) {
	up := openStage(t, pgtest.URL(t))
	q := openQueue(t, up.where)
	rec := &recorder{inner: q}
	r, err := outbox.NewRelay(up.st, rec, outbox.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	emit := func(body []byte) (commit func() error) {
		tx, err := up.st.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		require.NoError(t, outbox.Emit(outbox.WithTx(ctx, up.st.UnwrapTx(tx)), tx, body))
		return tx.Commit
	}
	commitFirst := emit(event("CUST-1", 1)) // seq 1, not committed yet
	second := make(chan error, 1)
	go func() {
		commit := emit(event("CUST-1", 2))
		second <- commit()
	}()
	// The second emit either waits for the first transaction (a lock) or,
	// without one, commits at once.
	var committedFirst bool
	waitfor.That(t, time.Minute, "the second emit committed or waiting for the first", func() bool {
		if len(second) > 0 {
			return true
		}
		var waiting int
		require.NoError(t, up.st.DB().QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&waiting))
		return waiting > 0
	})
	_, err = r.RunOnce(ctx)
	require.NoError(t, err)
	require.NoError(t, commitFirst())
	committedFirst = true
	require.NoError(t, <-second)
	_, err = r.RunOnce(ctx)
	require.NoError(t, err)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.True(t, committedFirst)
	require.Len(t, rec.bodies, 2)
	require.True(t, strings.Contains(rec.bodies[0], `"CUST-1-v1"`), "published in seq order: %v", rec.bodies)
}
