package effects_test

// A pending row's lease follows its caller's liveness (docs/design.md
// §11, §10.2): the heartbeat renews it to three heartbeats ahead while the
// call runs, so a slow call that outlives many heartbeats, with a beat
// lost now and then (a busy database), stays the live caller's, and
// another attempt meanwhile gets InFlightError instead of calling again or
// turning a running call uncertain. The tests run inside a
// testing/synctest bubble: the clock is fake, nothing sleeps on real
// time. Planted-bug table: docs/mutation.md.

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

// lossyStore loses the lease renewals its drop says to (a beat that did
// not reach the database in time).
type lossyStore struct {
	store.Store
	drop func(n int) bool
}

func (s *lossyStore) Executor() store.Executor {
	return &lossyExecutor{Executor: s.Store.Executor(), s: s}
}

type lossyExecutor struct {
	store.Executor
	s  *lossyStore
	mu sync.Mutex
	n  int
}

func (e *lossyExecutor) EffectRenewLease(ctx context.Context, p store.EffectRenewLeaseParams) error {
	e.mu.Lock()
	e.n++
	n := e.n
	e.mu.Unlock()
	if e.s.drop(n) {
		return errors.New("renewal lost")
	}
	return e.Executor.EffectRenewLease(ctx, p)
}

// slowCall blocks until released and counts the calls made.
type slowCall struct {
	calls   atomic.Int32
	release chan struct{}
}

func (c *slowCall) call(ctx context.Context, key string) (string, error) {
	c.calls.Add(1)
	select {
	case <-c.release:
		return "ref-1", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (c *slowCall) answer() {
	select {
	case <-c.release:
	default:
		close(c.release)
	}
}

// A call that runs for ten heartbeats, with every third renewal of its
// lease lost, stays in flight for any other attempt (another process) at
// every half heartbeat: each gets InFlightError, the remote is called
// once, and the row ends succeeded. A lease renewed for less than its
// span (one heartbeat instead of three) runs out after one lost beat; the
// other attempt then turns a running call uncertain and, reconciled as
// absent, calls the remote a second time.
func TestSlowLiveCallKeepsItsLeaseThroughALostBeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seqbox.db"))
		require.NoError(t, err)
		defer st.Close()
		remote := &slowCall{release: make(chan struct{})}
		defer remote.answer()
		lossy := &lossyStore{Store: st, drop: func(n int) bool { return n%3 == 2 }}
		cfg := effects.Config{Heartbeat: time.Second, Timeout: time.Hour,
			// Asked whether a call that is in fact still running took
			// effect: not yet. Only a caller that wrongly took the call for
			// dead asks.
			Reconcile: func(context.Context, effects.Effect) (effects.Reconciliation, error) {
				return effects.Reconciliation{}, nil
			}}
		caller, err := effects.New(lossy, cfg)
		require.NoError(t, err)
		other, err := effects.New(st, cfg) // another process's ledger
		require.NoError(t, err)
		id := seqboxtype.Identity{Consumer: "c", Source: "crm", ID: "m"}

		type result struct {
			ref string
			err error
		}
		done := make(chan result, 1)
		go func() {
			ref, err := caller.DoFor(ctx, id, "crm.create_task", remote.call)
			done <- result{ref, err}
		}()
		synctest.Wait()
		require.Equal(t, int32(1), remote.calls.Load())
		time.Sleep(250 * time.Millisecond) // then every half heartbeat, never at the instant of a beat
		for i := range 20 {
			time.Sleep(500 * time.Millisecond)
			_, err := other.DoFor(ctx, id, "crm.create_task", remote.call)
			var inFlight *effects.InFlightError
			require.ErrorAs(t, err, &inFlight, "%s into a live call: its lease ran out (renewed for less than three heartbeats?)",
				250*time.Millisecond+time.Duration(i+1)*500*time.Millisecond)
			require.Equal(t, int32(1), remote.calls.Load(), "the remote was called again while the first call ran")
		}
		remote.answer()
		r := <-done
		require.NoError(t, r.err)
		require.Equal(t, "ref-1", r.ref)
		ref, err := other.DoFor(ctx, id, "crm.create_task", remote.call)
		require.NoError(t, err)
		require.Equal(t, "ref-1", ref)
		require.Equal(t, int32(1), remote.calls.Load())
	})
}

// Without a lost beat, the lease of a slow call is always at least two
// heartbeats ahead after a renewal: it is renewed for its full span of
// three heartbeats, as Effect.LeaseUntil shows.
func TestSlowCallLeaseIsRenewedForItsSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seqbox.db"))
		require.NoError(t, err)
		defer st.Close()
		remote := &slowCall{release: make(chan struct{})}
		defer remote.answer()
		l, err := effects.New(st, effects.Config{Heartbeat: time.Second, Timeout: time.Hour})
		require.NoError(t, err)
		id := seqboxtype.Identity{Consumer: "c", Source: "crm", ID: "m"}
		done := make(chan error, 1)
		go func() {
			_, err := l.DoFor(ctx, id, "crm.create_task", remote.call)
			done <- err
		}()
		synctest.Wait()
		for i := range 6 {
			time.Sleep(time.Second + time.Duration(i)*100*time.Millisecond)
			synctest.Wait()
			es, err := l.List(ctx, effects.Filter{Consumer: "c"})
			require.NoError(t, err)
			require.Len(t, es, 1)
			require.NotNil(t, es[0].LeaseUntil)
			ahead := time.Until(*es[0].LeaseUntil)
			require.Greater(t, ahead, 2*time.Second, "the lease of a live call is renewed three heartbeats ahead; %s left", ahead)
		}
		remote.answer()
		require.NoError(t, <-done)
	})
}

// A caller that was slow, not dead: every renewal of its lease was lost,
// so another attempt took its row for a dead caller's and turned it
// uncertain. Its answer, when it comes, is still this call's (the same
// call count, uncertain only for the lease): it is recorded succeeded and
// returned, not refused as if an operator had recorded the row. (Kills the
// mutation survivors of effects/ledger.go's "from uncertain too" and
// of the call count record's checks; docs/mutation.md.)
func TestSlowCallerWhoseLeaseRanOutKeepsItsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seqbox.db"))
		require.NoError(t, err)
		defer st.Close()
		remote := &slowCall{release: make(chan struct{})}
		defer remote.answer()
		cfg := effects.Config{Heartbeat: time.Second, Timeout: time.Hour}
		caller, err := effects.New(&lossyStore{Store: st, drop: func(int) bool { return true }}, cfg)
		require.NoError(t, err)
		other, err := effects.New(st, cfg)
		require.NoError(t, err)
		id := seqboxtype.Identity{Consumer: "c", Source: "crm", ID: "m"}
		type result struct {
			ref string
			err error
		}
		done := make(chan result, 1)
		go func() {
			ref, err := caller.DoFor(ctx, id, "crm.create_task", remote.call)
			done <- result{ref, err}
		}()
		synctest.Wait()
		time.Sleep(3*time.Second + 500*time.Millisecond) // its lease ran out
		_, err = other.DoFor(ctx, id, "crm.create_task", remote.call)
		var uncertain *effects.UncertainError
		require.ErrorAs(t, err, &uncertain, "a pending row whose lease ran out is uncertain")
		remote.answer()
		r := <-done
		require.NoError(t, r.err, "the slow caller's own answer is refused")
		require.Equal(t, "ref-1", r.ref)
		es, err := other.List(ctx, effects.Filter{Consumer: "c"})
		require.NoError(t, err)
		require.Len(t, es, 1)
		require.Equal(t, effects.Succeeded, es[0].State)
		require.Equal(t, "ref-1", es[0].Ref)
		require.Equal(t, int32(1), remote.calls.Load())
	})
}

// The instant a pending row's lease ends, its caller no longer vouches
// for it (docs/design.md §11): a lease is three heartbeats from the last
// renewal, and a caller frozen since then is taken for dead at exactly
// LeaseUntil, not a moment later. One microsecond before, another attempt
// is told the call is in flight; at the instant itself, the row is listed
// uncertain and another attempt gets an UncertainError (no Reconcile)
// instead of waiting on a lease that has run out. The clock is injected,
// so the test lands on the boundary exactly. Covers the boundary of
// Ledger.live: a lease ending exactly now counted as live.
func TestAPendingRowWhoseLeaseEndsNowIsADeadCallers(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		clock, now := movableClock()
		l, err := effects.New(st, effects.Config{Heartbeat: time.Hour, Now: now})
		require.NoError(t, err)
		ctx := context.Background()
		start := now()

		f := freeze(l, func() (string, error) { return "task-1", nil })
		e := state(t, l)
		require.Equal(t, effects.Pending, e.State)
		require.NotNil(t, e.LeaseUntil)
		require.True(t, e.LeaseUntil.Equal(start.Add(3*time.Hour)), "the lease is three heartbeats: %s", e.LeaseUntil)

		clock.Add((3*time.Hour - time.Microsecond).Microseconds()) // a microsecond before the lease ends
		require.Equal(t, effects.Pending, state(t, l).State, "a lease with a microsecond left is its caller's")
		_, err = l.DoFor(ctx, msg, "crm.create_task", func(context.Context, string) (string, error) {
			t.Fatal("called again while the first call's lease was live")
			return "", nil
		})
		var inFlight *effects.InFlightError
		require.ErrorAs(t, err, &inFlight)

		clock.Add(1) // a microsecond on: now is LeaseUntil
		require.Equal(t, effects.Uncertain, state(t, l).State, "a pending row whose lease ends now was listed as its caller's still")
		_, err = l.DoFor(ctx, msg, "crm.create_task", func(context.Context, string) (string, error) {
			t.Fatal("called again over a call that may have taken effect")
			return "", nil
		})
		require.NotErrorAs(t, err, &inFlight, "a lease that ends now was taken as live: the attempt waits on a dead caller")
		var uncertain *effects.UncertainError
		require.ErrorAs(t, err, &uncertain, "a pending row whose lease ended is uncertain")

		// The frozen caller's answer still comes back as its own.
		ref, err := f.finish()
		require.NoError(t, err)
		require.Equal(t, "task-1", ref)
		require.Equal(t, effects.Succeeded, state(t, l).State)
	})
}

// movableClock is a ledger's clock that starts now and moves only when
// the test adds microseconds to clock.
func movableClock() (clock *atomic.Int64, now func() time.Time) {
	clock = new(atomic.Int64)
	clock.Store(time.Now().UnixMicro())
	return clock, func() time.Time { return time.UnixMicro(clock.Load()) }
}
