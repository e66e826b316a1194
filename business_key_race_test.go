package seqbox_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/seqboxtype"
)

// Class 1 of issue 36: two events with other ids and other partition keys
// but one business key, in two consumers on one PostgreSQL database. The
// first has taken its turn (which reserves the business key) and not yet
// committed when the second looks: under READ COMMITTED the second's read
// sees nothing, and without a reservation that waits for the first both
// reached the agent. The second must wait for the first's commit, see its
// reservation, and never reach the agent while the first's call may apply.
func TestBusinessKeyIsReservedAtomicallyOnPostgres(t *testing.T) {
	r := newPGRace(t, "bk")
	doneA, doneB, releaseA := r.holdA(t, withBusinessKey("a1", "opp-a", "followup:1"), withBusinessKey("b1", "opp-b", "followup:1"))
	// B either waits on A's reservation or, without one, goes on to the
	// agent.
	require.Empty(t, r.bReachesAgent(t), "b1 reached the agent while a1, uncommitted, held the business key")
	releaseA()

	dsA := <-doneA
	require.Equal(t, []string{"a1:applied"}, outcomes(dsA))
	dsB := <-doneB
	require.Len(t, dsB, 1)
	require.Contains(t, []seqboxtype.Outcome{seqboxtype.Retry, seqboxtype.SemanticDuplicate}, dsB[0].Outcome, dsB[0].Reason)
	results, err := r.b.Deliver(context.Background(), withBusinessKey("b1", "opp-b", "followup:1"), 2)
	require.NoError(t, err)
	require.Equal(t, []string{"b1:semantic_duplicate"}, outcomes(results), results[0].Reason)
	require.Equal(t, []string{"a1"}, r.agent.called(), "the business key reached the agent once")
}

// The same race for a message let out of the parked table: a1, parked
// behind its key's turn, is let out (and takes its turn, reserving its
// business key) in the transaction that applies that turn's holder, whose
// batch did not lock a1's business key up front. That transaction locks
// it for a1 itself (lockForTurn), so b1, of another key and the same
// business key, waits for its commit and never reaches the agent while
// a1's call may apply. Without that lock (found by mutation testing,
// docs/mutation.md) b1 read nothing of a1's uncommitted turn and reached
// the agent too.
func TestUnparkedBusinessKeyIsReservedAtomicallyOnPostgres(t *testing.T) {
	r := newPGRace(t, "bk-unparked")
	ctx := context.Background()
	var armed atomic.Bool
	atCommit, held := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(held) })
	t.Cleanup(release)
	var once sync.Once
	r.hookA = func(p fault.Point) error {
		if p == fault.BeforeCommit && armed.Load() {
			once.Do(func() {
				close(atCommit)
				<-held
			})
		}
		return nil
	}
	// p0 holds opp-a's turn while the agent thinks about it.
	gate := make(chan struct{})
	r.agent.mu.Lock()
	r.agent.block["p0"] = gate
	r.agent.mu.Unlock()
	doneP0 := deliverAsync(r.a, unversioned("p0", "opp-a"))
	require.Equal(t, "p0", <-r.agent.started)
	parked, err := r.a.Deliver(ctx, withBusinessKey("a1", "opp-a", "followup:1"), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"a1:held"}, outcomes(parked), "a1 waits behind p0")

	// p0's answer: the transaction that applies it lets a1 out, and is
	// held at its commit.
	armed.Store(true)
	close(gate)
	<-atCommit
	doneB := deliverAsync(r.b, withBusinessKey("b1", "opp-b", "followup:1"))
	require.Empty(t, r.bReachesAgent(t), "b1 reached the agent while a1, let out and uncommitted, held the business key")
	release()

	require.Equal(t, []string{"p0:applied", "a1:applied"}, outcomes(<-doneP0))
	dsB := <-doneB
	require.Len(t, dsB, 1)
	require.Contains(t, []seqboxtype.Outcome{seqboxtype.Retry, seqboxtype.SemanticDuplicate}, dsB[0].Outcome, dsB[0].Reason)
	require.Equal(t, []string{"p0", "a1"}, r.agent.called(), "the business key reached the agent once")
}
