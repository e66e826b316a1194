package seqbox_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/stretchr/testify/require"
)

// Waiting for a call that runs elsewhere (an agent's step still running,
// a live caller's pending ledger row) is no failure, and no crash either:
// the deliveries that ended in such a wait are left out of the
// crash-loop bound (crashLoopFactor times MaxAttempts deliveries with no
// outcome), and the bound still holds for the rest. They were counted: an
// agent step that ran about a minute past the gateway's agent timeout had
// its event dead-lettered, "delivered 21 times without settling (a crash
// loop?)", while the step still ran (docs/mutation.md, the SDKs' sweep).
func TestWaitsForACallThatRunsAreNoCrashLoop(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testWaitsAreNoCrashLoop(t, setup(t)) })
	t.Run("postgres", func(t *testing.T) { testWaitsAreNoCrashLoop(t, setupPostgres(t)) })
}

func testWaitsAreNoCrashLoop(t *testing.T, b *bundle) {
	const waits = 12
	b.cfg.Retry.MaxAttempts = 2 // the bound: 8 deliveries with no outcome
	asks := map[string]*atomic.Int32{"e1": {}, "e2": {}}
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		if asks[ev.ID].Add(1) <= waits {
			return nil, &effects.InFlightError{IdempotencyKey: ev.ID + "/agent", Until: time.Now().Add(time.Second)}
		}
		return []byte("done"), nil
	}
	c := b.consumer(t)
	ctx := context.Background()
	deliver := func(id string, attempt int) seqboxtype.Result {
		t.Helper()
		raw := []byte(`{"specversion":"1.0","id":"` + id + `","source":"crm","type":"t","partitionkey":"` + id + `"}`)
		results, err := c.Deliver(ctx, raw, attempt)
		require.NoError(t, err)
		require.Len(t, results, 1)
		return results[0]
	}
	for _, id := range []string{"e1", "e2"} {
		// The broker's delivery count goes up with each wait.
		for attempt := 1; attempt <= waits; attempt++ {
			res := deliver(id, attempt)
			require.Equal(t, seqboxtype.Retry, res.Outcome, "%s, delivery %d: %s", id, attempt, res.Reason)
		}
	}
	// Eight deliveries besides the waits are within the bound: e1 applies.
	res := deliver("e1", waits+8)
	require.Equal(t, seqboxtype.Applied, res.Outcome, res.Reason)
	// Nine are past it: e2 is a crash loop.
	res = deliver("e2", waits+9)
	require.Equal(t, seqboxtype.DeadLettered, res.Outcome, res.Reason)
	require.Contains(t, res.Reason, "delivered 21 times without settling")
}

// At the largest MaxAttempts Validate takes, the crash-loop bound (four
// times it) still fits an int, on a 32-bit one too: a first delivery
// applies. Past 2^61 on 64 bits, and from 2^29 on 32, the bound wrapped
// and every message was dead-lettered on its first delivery.
func TestTheLargestMaxAttemptsIsNoCrashLoop(t *testing.T) {
	b := setup(t)
	b.cfg.Retry.MaxAttempts = seqbox.MaxRetryAttempts
	c := b.consumer(t)
	results, err := c.Deliver(context.Background(), []byte(`{"specversion":"1.0","id":"a","source":"crm","type":"t","partitionkey":"k"}`), 1)
	require.NoError(t, err)
	require.Len(t, results, 1)
	require.Equal(t, seqboxtype.Applied, results[0].Outcome, results[0].Reason)
}
