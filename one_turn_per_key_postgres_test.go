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
// now taken before the savepoint (business_key_lock.go, lockTurnKey).

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
)

func TestOneTurnPerKeyAcrossProcessesOnPostgres(t *testing.T) {
	for _, tc := range []struct {
		name     string
		keyKnown bool // the key's row exists before the race
	}{{"new key", false}, {"known key", true}} {
		t.Run(tc.name, func(t *testing.T) { oneTurnPerKeyAcrossProcesses(t, tc.keyKnown) })
	}
}

func oneTurnPerKeyAcrossProcesses(t *testing.T, keyKnown bool) {
	ctx := context.Background()
	u := pgtest.URL(t)
	open := func() store.Store {
		st, err := postgres.Open(ctx, u)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}
	stA, stB := open(), open()
	require.NoError(t, replay.EnsureRecordTables(ctx, stA.DB()))
	a := newAgent()
	cfg := func(st store.Store) seqbox.Config {
		return seqbox.Config{Name: "turns", Store: st, Handler: replay.RecordHandler("turns"), Decide: a.decide,
			Retry: seqbox.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}}
	}
	cA, err := seqbox.NewConsumer(cfg(stA))
	require.NoError(t, err)
	cB, err := seqbox.NewConsumer(cfg(stB))
	require.NoError(t, err)
	if keyKnown {
		ds, err := cA.Deliver(ctx, unversioned("e0", "k"), 1)
		require.NoError(t, err)
		require.Equal(t, []string{"e0:applied"}, outcomes(ds))
		require.Equal(t, "e0", <-a.started)
	}

	// A's next commit (the one that takes e1's turn) waits for release.
	atCommit, release := make(chan struct{}), make(chan struct{})
	releaseA := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseA)
	var once sync.Once
	fault.Install(cA, func(p fault.Point) error {
		if p == fault.BeforeCommit {
			once.Do(func() {
				close(atCommit)
				<-release
			})
		}
		return nil
	})
	doneA := make(chan []seqboxtype.Result, 1)
	go func() {
		ds, _ := cA.Deliver(ctx, unversioned("e1", "k"), 1)
		doneA <- ds
	}()
	<-atCommit
	doneB := make(chan []seqboxtype.Result, 1)
	go func() {
		ds, _ := cB.Deliver(ctx, unversioned("e3", "k"), 1)
		doneB <- ds
	}()
	// While e1's turn is uncommitted, e3 must wait for it (the key's
	// lock, which PostgreSQL shows as not granted) or park behind it; it
	// must not be decided, let alone applied.
	var early []seqboxtype.Result
	waited := waitfor.Until(time.Minute, func() bool {
		select {
		case early = <-doneB:
			return true
		default:
		}
		var n int
		require.NoError(t, stA.DB().QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&n))
		return n > 0
	})
	require.True(t, waited, "e3 neither waited nor ended")
	if early != nil {
		releaseA()
		<-doneA
		t.Fatalf("e3 ended %v while e1, uncommitted, was taking its key's turn; the agent was asked %v", outcomes(early), a.called())
	}
	require.NotContains(t, a.called(), "e3", "e3 reached the agent while e1, uncommitted, was taking its key's turn")
	releaseA()
	dsA := <-doneA
	require.Equal(t, "e1:applied", outcomes(dsA)[0])
	dsB := <-doneB
	// e3 parked behind e1's turn and applied once e1 did: as a successor
	// e1's unparking released (in A's results), or on its own.
	require.Contains(t, append(outcomes(dsA), outcomes(dsB)...), "e3:applied")
	calls := a.called()
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
