package seqbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

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
	var reached string
	r.waitBWaits(t, func() bool {
		select {
		case reached = <-r.agent.started:
			return true
		default:
			return false
		}
	})
	require.Empty(t, reached, "b1 reached the agent while a1, uncommitted, held the business key")
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
