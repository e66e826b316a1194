package seqbox_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// A batch of a consumer with Decide runs without savepoints (the
// optimistic run): the messages it stops to be decided write nothing but
// their turn and claim, and a message whose key's turn an earlier one of
// the batch took waits for it instead of being decided beside it. a and b
// share key k and carry no version, so only a's turn keeps b from the
// agent while a is decided; c is another key's, decided beside a.
func TestOptimisticBatchStopsALaterMessageBehindItsKeysTurn(t *testing.T) {
	r := newPipeRig(t, "a")
	b, started, release := r.b, r.started, r.release
	var runs, runsAtFirstCommit atomic.Int32
	c := b.armedConsumer(t, func(p fault.Point) error {
		switch p {
		case fault.BeforeTx:
			runs.Add(1)
		case fault.BeforeCommit:
			runsAtFirstCommit.CompareAndSwap(0, runs.Load())
		}
		return nil
	})
	ctx := context.Background()
	type delivered struct {
		res [][]seqboxtype.Result
		err error
	}
	done := make(chan delivered, 1)
	go func() {
		res, err := c.DeliverBatch(ctx, [][]byte{unversioned("a", "k"), unversioned("b", "k"), unversioned("c", "k2")})
		done <- delivered{res, err}
	}()

	// a and c are asked after their batch committed; a holds k's turn
	// until release, c is applied meanwhile.
	require.ElementsMatch(t, []string{"a", "c"}, []string{<-started, <-started})
	waitfor.That(t, 20*time.Second, "c applied", func() bool { return b.effects(t, "c") == 1 })
	require.Equal(t, int32(1), runsAtFirstCommit.Load(), "the batch committed in its first, optimistic run")
	count := func(table, id string) int {
		var n int
		require.NoError(t, b.store.DB().QueryRow(`SELECT COUNT(*) FROM `+table+` WHERE consumer = $1 AND id = $2`,
			b.cfg.Name, id).Scan(&n))
		return n
	}
	require.Equal(t, 1, count("seqbox_retries", "a"), "a holds k's turn while it is decided")
	require.Equal(t, 0, count("seqbox_inbox", "a"), "a's inbox row went with its stop: it has no outcome yet")
	require.Equal(t, 0, count("seqbox_retries", "b"), "b took no turn of its own: it waits for a")
	require.Equal(t, 0, count("seqbox_decision_claims", "b"), "b is not being decided")
	require.Equal(t, 0, count("seqbox_inbox", "b"))
	require.Equal(t, 0, b.effects(t, "b"))

	close(release)
	require.Equal(t, "b", <-started, "b is asked for once a applied")
	got := <-done
	require.NoError(t, got.err)
	for i, id := range []string{"a", "b", "c"} {
		require.Equal(t, seqboxtype.Applied, got.res[i][0].Outcome, id)
	}
	require.Equal(t, 1, b.effects(t, "a"))
	require.Equal(t, 1, b.effects(t, "b"))
	require.Equal(t, 0, count("seqbox_retries", "b"), "b's turn ended with it")
}

// The claims an optimistic batch takes for the messages it stops are
// taken together at its end; one another process holds, alive, is taken
// off its message there, so that its decider claims for itself, finds
// the other's claim and waits, and the agent is not asked twice.
func TestOptimisticBatchLeavesAClaimAnotherProcessHolds(t *testing.T) {
	b := setup(t)
	var asked atomic.Int32
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		asked.Add(1)
		return []byte("plan"), nil
	}
	c := b.consumer(t)
	ctx := context.Background()
	now := time.Now()
	claim, err := b.store.Executor().DecisionClaim(ctx, store.DecisionClaimParams{Consumer: b.cfg.Name, Source: "crm", ID: "x",
		Owner: "another-process", Now: now, Until: now.Add(time.Hour)})
	require.NoError(t, err)
	require.True(t, claim.Claimed)

	res, err := c.DeliverBatch(ctx, [][]byte{unversioned("x", "k"), unversioned("y", "k2")})
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Retry, res[0][0].Outcome, "x waits for the other process's decision: %+v", res[0][0])
	require.Contains(t, res[0][0].Reason, "in flight elsewhere")
	require.Equal(t, seqboxtype.Applied, res[1][0].Outcome)
	require.Equal(t, int32(1), asked.Load(), "only y was asked for")
}

// A message whose decision another process claimed comes back as soon as
// that claim runs out unrenewed (its decider died, say), not a whole
// waitForOthers (DecideTimeout/8: 15 s by default) later.
func TestWaiterComesBackWhenTheOthersClaimRunsOut(t *testing.T) {
	b := setup(t)
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) { return []byte("plan"), nil }
	c := b.consumer(t)
	ctx := context.Background()
	now := time.Now()
	until := now.Add(3 * time.Second) // a dead decider's claim, three heartbeats from its last renewal
	_, err := b.store.Executor().DecisionClaim(ctx, store.DecisionClaimParams{Consumer: b.cfg.Name, Source: "crm", ID: "x",
		Owner: "a-dead-process", Now: now, Until: until})
	require.NoError(t, err)

	res, err := c.Deliver(ctx, unversioned("x", "k"), 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Retry, res[0].Outcome, "%+v", res[0])
	require.LessOrEqual(t, res[0].RetryAfter, time.Until(until)+time.Second, "back once the claim ran out")
	require.Greater(t, res[0].RetryAfter, time.Duration(0))
}
