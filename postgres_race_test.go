package seqbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
)

// pgRace is two consumers of one name on one PostgreSQL database, as two
// processes would be, sharing one scripted agent: A's transaction is held
// open at its commit while B runs beside it.
type pgRace struct {
	a, b  *seqbox.Consumer
	st    store.Store
	agent *agent
	// hookA is A's crash hook, set by holdA.
	hookA fault.Hook
}

func newPGRace(t *testing.T, name string) *pgRace {
	t.Helper()
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
	r := &pgRace{st: stA, agent: newAgent()}
	consumer := func(st store.Store) *seqbox.Consumer {
		c, err := seqbox.NewConsumer(seqbox.Config{Name: name, Store: st, Handler: replay.RecordHandler(name), Decide: r.agent.decide,
			Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}}})
		require.NoError(t, err)
		return c
	}
	r.a = consumer(own.Wrap(stA, own.Options{Hook: func(p fault.Point) error { return r.hookA.At(p) }}))
	r.b = consumer(stB)
	return r
}

// holdA delivers rawA through A with its next commit held open, waits
// until it is held there, then delivers rawB through B. It returns each
// one's results as they end, and the release of A's commit (also run when
// the test ends, before the stores close).
func (r *pgRace) holdA(t *testing.T, rawA, rawB []byte) (doneA, doneB chan []seqboxtype.Result, release func()) {
	t.Helper()
	atCommit, held := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(held) })
	t.Cleanup(release)
	var once sync.Once
	r.hookA = func(p fault.Point) error {
		if p == fault.BeforeCommit {
			once.Do(func() {
				close(atCommit)
				<-held
			})
		}
		return nil
	}
	doneA = deliverAsync(r.a, rawA)
	<-atCommit
	return doneA, deliverAsync(r.b, rawB), release
}

// deliverAsync delivers raw through c (attempt 1) in a goroutine; its
// results, or its error as one result, come on the channel.
func deliverAsync(c *seqbox.Consumer, raw []byte) chan []seqboxtype.Result {
	done := make(chan []seqboxtype.Result, 1)
	go func() {
		results, err := c.Deliver(context.Background(), raw, 1)
		if err != nil {
			results = []seqboxtype.Result{{Outcome: "error", Reason: err.Error()}}
		}
		done <- results
	}()
	return done
}

// bReachesAgent waits until B waits for a lock or reaches the agent, and
// returns the id the agent was asked for, if it was.
func (r *pgRace) bReachesAgent(t *testing.T) (reached string) {
	t.Helper()
	r.waitBWaits(t, func() bool {
		select {
		case reached = <-r.agent.started:
			return true
		default:
			return false
		}
	})
	return reached
}

// waitBWaits waits until B waits for a lock PostgreSQL shows as not
// granted, or until stop says B went on without waiting (it ended, or
// reached the agent); it fails the test when neither happens.
func (r *pgRace) waitBWaits(t *testing.T, stop func() bool) (wentOn bool) {
	t.Helper()
	waiting := func() bool {
		var n int
		require.NoError(t, r.st.DB().QueryRowContext(context.Background(), `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&n))
		return n > 0
	}
	require.True(t, waitfor.Until(time.Minute, func() bool {
		wentOn = stop()
		return wentOn || waiting()
	}), "B neither waited nor went on")
	return wentOn
}
