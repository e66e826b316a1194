package writeturn

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// order records who took a turn, in the order they took it, each giving
// it back at once.
type order struct {
	mu  sync.Mutex
	got []string
}

// take starts a taker named name that waits for t with ctx, notes itself
// and gives the turn back.
func (o *order) take(t *testing.T, turn *Turn, ctx context.Context, name string) {
	go func() {
		release, err := turn.Take(ctx)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		o.mu.Lock()
		o.got = append(o.got, name)
		o.mu.Unlock()
		release()
	}()
	synctest.Wait() // queued before the next one
}

func TestAProducerGoesBeforeTheWaitingConsumers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var turn Turn
		release, err := turn.Take(context.Background())
		require.NoError(t, err)
		var o order
		for _, n := range []string{"batch-1", "batch-2", "receive"} {
			o.take(t, &turn, context.Background(), n)
		}
		o.take(t, &turn, Urgent(context.Background()), "ingest")
		require.Empty(t, o.got, "nobody takes a held turn")
		release()
		synctest.Wait()
		require.Equal(t, []string{"ingest", "batch-1", "batch-2", "receive"}, o.got)
		require.False(t, turn.Held())
	})
}

func TestProducersNeverGoTwiceInARowWhileAConsumerWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var turn Turn
		release, err := turn.Take(Urgent(context.Background()))
		require.NoError(t, err)
		var o order
		o.take(t, &turn, context.Background(), "batch-1")
		o.take(t, &turn, Urgent(context.Background()), "ingest-1")
		o.take(t, &turn, Urgent(context.Background()), "ingest-2")
		o.take(t, &turn, context.Background(), "batch-2")
		release()
		synctest.Wait()
		// The holder was a producer: a consumer next, then producers and
		// consumers by turns.
		require.Equal(t, []string{"batch-1", "ingest-1", "batch-2", "ingest-2"}, o.got)
	})
}

func TestAProducerAloneTakesEveryTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var turn Turn
		release, err := turn.Take(Urgent(context.Background()))
		require.NoError(t, err)
		var o order
		o.take(t, &turn, Urgent(context.Background()), "ingest-1")
		o.take(t, &turn, Urgent(context.Background()), "ingest-2")
		release()
		synctest.Wait()
		require.Equal(t, []string{"ingest-1", "ingest-2"}, o.got)
	})
}

func TestAWaiterWhoseContextEndsHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var turn Turn
		release, err := turn.Take(context.Background())
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 1)
		go func() {
			_, err := turn.Take(ctx)
			errs <- err
		}()
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-errs, context.Canceled)
		var o order
		o.take(t, &turn, context.Background(), "batch")
		release()
		release() // twice: harmless
		synctest.Wait()
		require.Equal(t, []string{"batch"}, o.got, "the cancelled waiter was skipped")
		again, ok := turn.TryTake()
		require.True(t, ok, "the turn is free")
		again()
	})
}

// A waiter handed the turn just as its context ends either keeps it or
// passes it on: the turn is never lost.
func TestATurnHandedOverAsTheContextEndsIsNotLost(t *testing.T) {
	for range 200 {
		synctest.Test(t, func(t *testing.T) {
			var turn Turn
			release, err := turn.Take(context.Background())
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			type result struct {
				release func()
				err     error
			}
			got := make(chan result, 1)
			go func() {
				r, err := turn.Take(ctx)
				got <- result{r, err}
			}()
			synctest.Wait()
			var o order
			o.take(t, &turn, context.Background(), "next")
			cancel()
			release() // both ready when the waiter runs
			r := <-got
			if r.err == nil {
				r.release()
			} else if !errors.Is(r.err, context.Canceled) {
				t.Fatal(r.err)
			}
			synctest.Wait()
			require.Equal(t, []string{"next"}, o.got)
			again, ok := turn.TryTake()
			require.True(t, ok, "the turn is free at the end")
			again()
		})
	}
}

func TestTryTakeFailsWhileHeld(t *testing.T) {
	var turn Turn
	release, ok := turn.TryTake()
	require.True(t, ok)
	require.True(t, turn.Held())
	_, ok = turn.TryTake()
	require.False(t, ok)
	release()
	require.False(t, turn.Held())
}

// A turn handed to a waiter runs the new holder before the releaser's
// next step: on a process with every P busy, the woken holder otherwise
// waited for the releaser's post-commit work while the one writer sat
// idle (docs/benchmarks-history.md §44). One P makes the order certain.
func TestTheNextHolderRunsBeforeTheReleaserGoesOn(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var turn Turn
	release, err := turn.Take(context.Background())
	require.NoError(t, err)
	o := &order{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r, err := turn.Take(context.Background())
		if err != nil {
			t.Error(err)
			return
		}
		o.mu.Lock()
		o.got = append(o.got, "next holder")
		o.mu.Unlock()
		r()
	}()
	for turn.Waiters() == 0 {
		runtime.Gosched()
	}
	release()
	o.mu.Lock()
	o.got = append(o.got, "releaser")
	o.mu.Unlock()
	<-done
	require.Equal(t, []string{"next holder", "releaser"}, o.got)
}
