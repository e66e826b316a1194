package seqbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/stretchr/testify/require"
)

// A reconciliation that finds nothing while the uncertain call may still
// be running at the remote side (within the ledger's Timeout of it) is a
// wait, not a failure: it spends no attempt, and once the Timeout has
// passed the ledger calls again and the event applies. It was counted as
// a failed attempt: with the default backoff five attempts went by in 15
// s, inside the default 30 s Timeout, and an event whose next call would
// have succeeded was dead-lettered.
func TestReconciliationThatWaitsSpendsNoAttempt(t *testing.T) {
	b := setup(t)
	clock := newFoundClock()
	var calls, reconciles atomic.Int32
	ledger, err := effects.New(b.store, effects.Config{Now: clock.Now, Timeout: time.Minute,
		Reconcile: func(context.Context, effects.Effect) (effects.Reconciliation, error) {
			reconciles.Add(1)
			return effects.Reconciliation{Applied: false}, nil
		}})
	require.NoError(t, err)
	b.cfg.Now = clock.Now
	b.cfg.Retry.MaxAttempts = 2
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		ref, err := ledger.Do(ctx, "refund", func(context.Context, string) (string, error) {
			if calls.Add(1) == 1 {
				return "", errors.New("connection reset by peer") // may have reached the remote side
			}
			return "refund-1", nil
		})
		return []byte(ref), err
	}
	c := b.consumer(t)
	ctx := context.Background()
	raw := []byte(`{"specversion":"1.0","id":"e1","source":"crm","type":"t"}`)
	deliver := func() seqboxtype.Result {
		t.Helper()
		results, err := c.Deliver(ctx, raw, 1)
		require.NoError(t, err)
		return results[0]
	}
	require.Equal(t, seqboxtype.Retry, deliver().Outcome, "the uncertain call: attempt 1")
	for range 4 { // within the Timeout: the remote side may still apply the first call
		clock.Advance(5 * time.Second)
		res := deliver()
		require.Equal(t, seqboxtype.Retry, res.Outcome, res.Reason)
		require.Contains(t, res.Reason, "may still be running there")
	}
	require.EqualValues(t, 1, calls.Load(), "not called again while the first call may still apply")
	require.GreaterOrEqual(t, reconciles.Load(), int32(4))
	clock.Advance(time.Minute)
	res := deliver()
	require.Equal(t, seqboxtype.Applied, res.Outcome, res.Reason)
	require.EqualValues(t, 2, calls.Load())
}
