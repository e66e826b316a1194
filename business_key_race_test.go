package seqbox_test

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

// Class 1 of issue 36: two events with other ids and other partition keys
// but one business key, in two consumers on one PostgreSQL database. The
// first has taken its turn (which reserves the business key) and not yet
// committed when the second looks: under READ COMMITTED the second's read
// sees nothing, and without a reservation that waits for the first both
// reached the agent. The second must wait for the first's commit, see its
// reservation, and never reach the agent while the first's call may apply.
func TestBusinessKeyIsReservedAtomicallyOnPostgres(t *testing.T) {
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
		return seqbox.Config{Name: "bk", Store: st, Handler: replay.RecordHandler("bk"), Decide: a.decide,
			Retry: seqbox.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}}
	}
	cA, err := seqbox.NewConsumer(cfg(stA))
	require.NoError(t, err)
	cB, err := seqbox.NewConsumer(cfg(stB))
	require.NoError(t, err)

	// A's first commit (the one that takes its turn) waits for release.
	atCommit, release := make(chan struct{}), make(chan struct{})
	releaseA := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseA) // before the stores close, should the test fail first
	first := true
	fault.Install(cA, func(p fault.Point) error {
		if p == fault.BeforeCommit && first {
			first = false
			close(atCommit)
			<-release
		}
		return nil
	})

	doneA := make(chan []seqboxtype.Result, 1)
	go func() {
		ds, _ := cA.Deliver(ctx, withBusinessKey("a1", "opp-a", "followup:1"), 1)
		doneA <- ds
	}()
	<-atCommit
	doneB := make(chan []seqboxtype.Result, 1)
	go func() {
		ds, _ := cB.Deliver(ctx, withBusinessKey("b1", "opp-b", "followup:1"), 1)
		doneB <- ds
	}()

	// B either waits on A's reservation (a lock PostgreSQL shows as not
	// granted) or, without one, goes on to the agent.
	admin := stA.DB()
	waiting := func() bool {
		var n int
		require.NoError(t, admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&n))
		return n > 0
	}
	var reached string
	blocked := waitfor.Until(time.Minute, func() bool {
		select {
		case reached = <-a.started:
			return true
		default:
		}
		return waiting()
	})
	require.True(t, blocked, "B neither waited nor reached the agent")
	require.Empty(t, reached, "b1 reached the agent while a1, uncommitted, held the business key")
	releaseA()

	dsA := <-doneA
	require.Equal(t, []string{"a1:applied"}, outcomes(dsA))
	dsB := <-doneB
	require.Len(t, dsB, 1)
	require.Contains(t, []seqboxtype.Outcome{seqboxtype.Retry, seqboxtype.SemanticDuplicate}, dsB[0].Outcome, dsB[0].Reason)
	ds, err := cB.Deliver(ctx, withBusinessKey("b1", "opp-b", "followup:1"), 2)
	require.NoError(t, err)
	require.Equal(t, []string{"b1:semantic_duplicate"}, outcomes(ds), ds[0].Reason)
	require.Equal(t, []string{"a1"}, a.called(), "the business key reached the agent once")
}
