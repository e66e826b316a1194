package seqbox_test

// KNOWN BUG, found by TestRapidModelPostgres (model_rapid_pg_test.go),
// not fixed yet: this test FAILS on the current code and is skipped unless
// SEQBOX_KNOWN_BUGS=1. Remove the skip with the fix.
//
// Two events of one unversioned partition key, delivered at once to two
// consumer processes on one PostgreSQL database, both reach the agent:
// while e1's transaction (consumer A) has taken the key's turn and not yet
// committed, e3 (consumer B) does not wait for it, is decided, and is
// applied; e1 is asked and applied after it. The contract (shared
// DESIGN.md §4, "order at the agent"; docs/design.md §10.1: "a later event
// of the key, in this process or another, parks as held behind it") is
// broken, for a new key and for a key seen before. SQLite runs one writer
// at a time and does not show it.
//
// The likely cause (not verified in the code yet): the key's row lock
// (lockKey: KeyLock ... FOR UPDATE, KeyEnsure) is taken after the
// delivery's savepoint, and awaitDecision rolls back to that savepoint
// before TurnTake; PostgreSQL releases row locks taken in a rolled-back
// savepoint, so the turn is written without the key's lock, and B's
// KeyLock/flags read does not see A's uncommitted turn. 85a7bd1 fixed the
// same shape for the business key (BusinessKeyLock before the savepoint).

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
)

func TestOneTurnPerKeyAcrossProcessesOnPostgres(t *testing.T) {
	if os.Getenv("SEQBOX_KNOWN_BUGS") == "" {
		t.Skip("KNOWN BUG (found by TestRapidModelPostgres): one key's turn is not exclusive across processes on PostgreSQL; SEQBOX_KNOWN_BUGS=1 runs it")
	}
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
	// lock) or park behind it; it must not be decided, let alone applied.
	select {
	case ds := <-doneB:
		releaseA()
		<-doneA
		t.Fatalf("e3 ended %v while e1, uncommitted, was taking its key's turn; the agent was asked %v", outcomes(ds), a.called())
	case <-time.After(3 * time.Second):
	}
	require.NotContains(t, a.called(), "e3", "e3 reached the agent while e1, uncommitted, was taking its key's turn")
	releaseA()
	dsA := <-doneA
	require.Equal(t, []string{"e1:applied"}, outcomes(dsA))
	<-doneB
	calls := a.called()
	if i, j := indexOf(calls, "e1"), indexOf(calls, "e3"); j >= 0 {
		require.Less(t, i, j, "e3 reached the agent before e1: %v", calls)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
