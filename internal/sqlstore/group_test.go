package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

// Writes made outside a transaction at the same time on SQLite commit
// together (groupCommit), and each still gets its own answer: a write
// that fails (here a NOT NULL) fails alone, a duplicate is told it
// inserted nothing, and every other one is committed when it returns.
func TestGroupedWritesAnswerEachCaller(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	defer st.Close()
	op := st.Executor()
	at := time.Unix(1_800_000_000, 0)
	const n = 64
	var wg sync.WaitGroup
	inserted := make([]bool, n+1)
	errs := make([]error, n+2)
	for i := range n + 1 {
		wg.Go(func() {
			key := fmt.Sprintf("k%d", i%n) // the last one repeats k0
			inserted[i], errs[i] = op.EffectInsertPending(ctx, store.EffectInsertPendingParams{Consumer: "c", Source: "s",
				ID: fmt.Sprint(i), Action: "a", IdempotencyKey: key, At: at, LeaseUntil: at.Add(time.Minute)})
		})
	}
	wg.Go(func() {
		_, errs[n+1] = op.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: "c", Source: "s", ID: "bad", Decision: nil, At: at})
	})
	wg.Wait()
	require.Error(t, errs[n+1], "a write that fails fails alone")
	wins := 0
	for i := range n + 1 {
		require.NoError(t, errs[i], "write %d", i)
		if inserted[i] {
			wins++
		}
	}
	require.Equal(t, n, wins, "k0 was inserted once, the other write of it was told it inserted nothing")
	for i := range n {
		row, err := op.EffectGet(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err, "committed when its write returned")
		require.Equal(t, "pending", string(row.State))
	}
	_, err = op.DecisionGet(ctx, store.MessageRef{Consumer: "c", Source: "s", ID: "bad"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A write whose context ended before its group ran writes nothing and
// says so; the store closes with its writer goroutine.
func TestGroupedWriteGivenUpWritesNothing(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	op := st.Executor()
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = op.EffectInsertPending(done, store.EffectInsertPendingParams{Consumer: "c", Source: "s", ID: "1", Action: "a",
		IdempotencyKey: "k", At: time.Unix(1, 0), LeaseUntil: time.Unix(2, 0)})
	require.ErrorIs(t, err, context.Canceled)
	_, err = op.EffectGet(ctx, "k")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, st.Close())
	_, err = op.EffectInsertPending(ctx, store.EffectInsertPendingParams{Consumer: "c", Source: "s", ID: "1", Action: "a",
		IdempotencyKey: "k", At: time.Unix(1, 0), LeaseUntil: time.Unix(2, 0)})
	require.Error(t, err, "a closed store writes nothing")
}
