package seqbox_test

// Found by TestRapidModelPostgres (model_rapid_pg_test.go). Two events of
// one unversioned partition key, delivered at once to two consumer
// processes on one PostgreSQL database, both reached the agent: while e1's
// transaction (consumer A) had taken the key's turn and not yet committed,
// e3 (consumer B) did not wait for it, was decided and applied; e1 was
// asked and applied after it. The key's row lock was taken after the
// delivery's savepoint, and awaitDecision rolls back to that savepoint
// before TurnTake: PostgreSQL lets go a row lock taken in a rolled-back
// savepoint, so the turn was written without the key's lock. The lock is
// now taken before the savepoint (business_key_lock.go, lockForTurn).

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/seqboxtype"
)

// The third case gives e1 a business key: its batch then runs with a
// savepoint per delivery from the start (no optimistic run, whose key
// locks are taken up front), so only lockForTurn's lock keeps e1's key
// locked across the rollback to its savepoint. Without that lock (found by
// mutation testing, docs/mutation.md) the first two cases passed.
func TestOneTurnPerKeyAcrossProcessesOnPostgres(t *testing.T) {
	for _, tc := range []struct {
		name     string
		keyKnown bool // the key's row exists before the race
		e1       []byte
	}{
		{"new key", false, unversioned("e1", "k")},
		{"known key", true, unversioned("e1", "k")},
		{"known key, savepoints", true, withBusinessKey("e1", "k", "bk-1")},
	} {
		t.Run(tc.name, func(t *testing.T) { oneTurnPerKeyAcrossProcesses(t, tc.keyKnown, tc.e1) })
	}
}

func oneTurnPerKeyAcrossProcesses(t *testing.T, keyKnown bool, e1 []byte) {
	r := newPGRace(t, "turns")
	if keyKnown {
		results, err := r.a.Deliver(context.Background(), unversioned("e0", "k"), 1)
		require.NoError(t, err)
		require.Equal(t, []string{"e0:applied"}, outcomes(results))
		require.Equal(t, "e0", <-r.agent.started)
	}
	doneA, doneB, releaseA := r.holdA(t, e1, unversioned("e3", "k"))
	// While e1's turn is uncommitted, e3 must wait for it (the key's lock)
	// or park behind it; it must not be decided, let alone applied.
	var early []seqboxtype.Result
	if r.waitBWaits(t, func() bool {
		select {
		case early = <-doneB:
			return true
		default:
			return false
		}
	}) {
		releaseA()
		<-doneA
		t.Fatalf("e3 ended %v while e1, uncommitted, was taking its key's turn; the agent was asked %v", outcomes(early), r.agent.called())
	}
	require.NotContains(t, r.agent.called(), "e3", "e3 reached the agent while e1, uncommitted, was taking its key's turn")
	releaseA()
	dsA := <-doneA
	require.Equal(t, "e1:applied", outcomes(dsA)[0])
	dsB := <-doneB
	// e3 parked behind e1's turn and applied once e1 did: as a successor
	// e1's unparking released (in A's results), or on its own.
	require.Contains(t, append(outcomes(dsA), outcomes(dsB)...), "e3:applied")
	calls := r.agent.called()
	i, j := indexOf(calls, "e1"), indexOf(calls, "e3")
	require.True(t, i >= 0 && j > i, "e3 reached the agent before e1, or not at all: %v", calls)
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
