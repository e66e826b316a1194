package seqbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/store"
)

// purgeCall is one InboxPurge call a purgeLog saw: what it asked and
// what it got.
type purgeCall struct {
	p store.InboxPurgeParams
	r store.InboxPurgeResult
}

// purgeLog is a store whose executors record their InboxPurge calls.
type purgeLog struct {
	store.Store
	calls *[]purgeCall
}

func (s purgeLog) Executor() store.Executor {
	return purgeLogExecutor{Executor: s.Store.Executor(), calls: s.calls}
}

type purgeLogExecutor struct {
	store.Executor
	calls *[]purgeCall
}

func (e purgeLogExecutor) InboxPurge(ctx context.Context, p store.InboxPurgeParams) (store.InboxPurgeResult, error) {
	r, err := e.Executor.InboxPurge(ctx, p)
	*e.calls = append(*e.calls, purgeCall{p, r})
	return r, err
}

// Each purge batch starts where the previous one ended: Purge passes the
// last batch's latest retention end as the next one's From, so that a
// batch does not walk again over what earlier batches deleted (on
// PostgreSQL their index entries stay until VACUUM: at 3 million deleted
// a batch of 500 took 400 ms, docs/benchmarks-history.md §20). The first
// batch starts at the oldest identity, and every expired identity goes.
func TestPurgeBatchStartsWhereTheLastEnded(t *testing.T) {
	b := setup(t)
	clock := newFoundClock()
	b.cfg.Now = clock.Now
	b.cfg.RedeliveryWindow = time.Hour
	b.cfg.DLQRetention, b.cfg.RedriveWindow = 12*time.Hour, 12*time.Hour
	b.cfg.Retention = 48 * time.Hour
	var calls []purgeCall
	b.cfg.Store = purgeLog{Store: b.store, calls: &calls}
	c := b.consumer(t)
	for i := range 5 {
		require.Equal(t, []string{fmt.Sprintf("m%d:applied", i)}, outcomes(mustDeliver(t, c, unversioned(fmt.Sprintf("m%d", i), "opp"), 1)))
		clock.Advance(time.Minute)
	}
	clock.Advance(b.cfg.Retention)
	n, err := c.Purge(context.Background(), 2)
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	require.Zero(t, b.inboxRows(t))
	require.Len(t, calls, 3, "batches of 2, 2 and 1")
	require.True(t, calls[0].p.From.IsZero(), "the first batch starts at the oldest")
	for i := 1; i < len(calls); i++ {
		require.True(t, calls[i].p.From.Equal(calls[i-1].r.Last), "batch %d starts at %v, the last ended at %v", i, calls[i].p.From, calls[i-1].r.Last)
		require.True(t, calls[i].r.Last.After(calls[i-1].r.Last), "oldest first")
	}
}
