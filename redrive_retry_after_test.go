package seqbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

// A redrive an operator asked for (the CLI's, the admin API's) retries a
// transient failure in place, up to the retry policy's attempts: it waited
// the policy's backoff even where the remote side asked for longer
// (Retry-After), so an agent answering 503 with Retry-After: 3 was asked
// again 0.2 s later and the event was dead-lettered again within a second
// (a stranger's gateway). Delivery honours it; the redrive now does too.
func TestARedriveWaitsTheRetryAfterItWasAskedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := recordSQLite(t)
		var mu sync.Mutex
		var asked []time.Time
		busy := false
		decide := func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, time.Now())
			if busy {
				return nil, seqbox.RetryAfter(errors.New("503 busy"), 3*time.Second)
			}
			return nil, seqbox.Permanent(errors.New("400 from the agent"))
		}
		c, err := seqbox.NewConsumer(seqbox.Config{Name: "test", Store: st, Handler: replay.RecordHandler("test"), Decide: decide,
			Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 2, InitialBackoff: 200 * time.Millisecond, MaxBackoff: 10 * time.Second}}})
		require.NoError(t, err)
		redriveRequested(t, st, c)
		mu.Lock()
		busy, asked = true, nil
		mu.Unlock()
		n, err := c.RunRequests(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, asked, 2, "the redrive's two attempts")
		require.GreaterOrEqual(t, asked[1].Sub(asked[0]), 3*time.Second, "asked again before the Retry-After the agent gave")
	})
}

// A request whose action runs long (a redrive whose model call takes 40
// seconds) keeps its taker's sign of life fresh: another consumer of its
// name that looks for requests meanwhile leaves it running, and it
// finishes done. Only a taker that falls silent has its request failed
// (storetest's SilentTakersRequestFails).
func TestALongRequestKeepsItsTakerAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := recordSQLite(t)
		var slow sync.Mutex
		slowly := false
		decide := func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
			slow.Lock()
			defer slow.Unlock()
			if !slowly {
				return nil, seqbox.Permanent(errors.New("400 from the agent"))
			}
			time.Sleep(40 * time.Second)
			return []byte("ok"), nil
		}
		cfg := seqbox.Config{Name: "test", Store: st, Handler: replay.RecordHandler("test"), Decide: decide, DecideTimeout: time.Minute}
		a, err := seqbox.NewConsumer(cfg)
		require.NoError(t, err)
		req := redriveRequested(t, st, a)
		slow.Lock()
		slowly = true
		slow.Unlock()
		done := make(chan error, 1)
		go func() {
			_, err := a.RunRequests(ctx)
			done <- err
		}()
		b, err := seqbox.NewConsumer(cfg)
		require.NoError(t, err)
		for _, d := range []time.Duration{10 * time.Second, 20 * time.Second} { // two looks LiveWithin apart, into the call
			time.Sleep(d)
			n, err := b.RunRequests(ctx)
			require.NoError(t, err)
			require.Zero(t, n)
		}
		r, err := st.Executor().RequestGet(ctx, req)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.RequestRunning, r.State, "its taker is alive: %s", r.Error)
		require.NoError(t, <-done)
		r, err = st.Executor().RequestGet(ctx, req)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.RequestDone, r.State, r.Error)
	})
}

// recordSQLite opens a SQLite store in the test's directory with the
// record handler's tables, closed when the test ends.
func recordSQLite(t *testing.T) store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, replay.EnsureRecordTables(ctx, st.DB()))
	return st
}

// redriveRequested delivers event x (key k, version 1) to c, whose
// Decider fails it for good, and records an operator's redrive of its
// dead letter; it returns the request.
func redriveRequested(t *testing.T, st store.Store, c *seqbox.Consumer) int64 {
	t.Helper()
	ctx := context.Background()
	results, err := c.Deliver(ctx, keyed("x", "k", 1), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"x:dead_lettered"}, outcomes(results))
	letters, err := st.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: "test"})
	require.NoError(t, err)
	require.Len(t, letters, 1)
	req, err := st.Executor().RequestInsert(ctx, store.OperatorRequest{Consumer: "test", Action: store.ActionRedrive,
		Target: strconv.FormatInt(letters[0].Seq, 10), RequestedBy: "ops", Reason: "agent back", RequestedAt: time.Now()})
	require.NoError(t, err)
	return req
}

// A request abandoned while its action runs (its renewals came too
// late, and another consumer failed it) has its action cancelled at the
// taker's next renewal: the request says it failed and may be run again,
// so the action must not go on beside a second run.
func TestAnAbandonedRequestsActionIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := recordSQLite(t)
		var mu sync.Mutex
		slowly, cancelled := false, false
		decide := func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
			mu.Lock()
			slow := slowly
			mu.Unlock()
			if !slow {
				return nil, seqbox.Permanent(errors.New("400 from the agent"))
			}
			select {
			case <-time.After(40 * time.Second):
				return []byte("ok"), nil
			case <-ctx.Done():
				mu.Lock()
				cancelled = true
				mu.Unlock()
				return nil, ctx.Err()
			}
		}
		c, err := seqbox.NewConsumer(seqbox.Config{Name: "test", Store: st, Handler: replay.RecordHandler("test"), Decide: decide, DecideTimeout: time.Minute})
		require.NoError(t, err)
		req := redriveRequested(t, st, c)
		mu.Lock()
		slowly = true
		mu.Unlock()
		done := make(chan error, 1)
		go func() {
			_, err := c.RunRequests(ctx)
			done <- err
		}()
		time.Sleep(time.Second)
		r, err := st.Executor().RequestGet(ctx, req)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.RequestRunning, r.State)
		gone, err := st.Executor().RequestAbandon(ctx, store.RequestAbandonParams{Seq: req, AliveAt: r.AliveAt, Silent: 20 * time.Second, At: time.Now()})
		require.NoError(t, err)
		require.True(t, gone)
		require.NoError(t, <-done)
		mu.Lock()
		defer mu.Unlock()
		require.True(t, cancelled, "the action went on after its request was abandoned")
		r, err = st.Executor().RequestGet(ctx, req)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.RequestFailed, r.State)
		require.Contains(t, r.Error, "abandoned")
	})
}
