package outbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/outbox"
	"github.com/stretchr/testify/require"
)

// gatePublisher publishes through inner, except that the events whose
// body contains hold wait until release is closed (stuck: a broker call
// with no deadline of its own, ignoring ctx).
type gatePublisher struct {
	inner   *recorder
	hold    string
	release chan struct{}
}

func (p *gatePublisher) Publish(ctx context.Context, body []byte) error {
	if strings.Contains(string(body), p.hold) {
		<-p.release
	}
	return p.inner.Publish(ctx, body)
}

// A publish that never returns holds up its own key only: the round ends
// within its bound (two thirds of the lease, so that no standby takes
// over while it publishes), the other keys' events are published, and
// the stuck event counts as a refusal of its key, which backs off. Before,
// one hung publish stopped every key for good.
func TestAHungPublishHoldsUpItsKeyOnly(t *testing.T) {
	up := openStage(t, filepath.Join(t.TempDir(), "seqbox.db"))
	emitAll(t, up, 3, 1) // ord-0-v1, ord-1-v1, ord-2-v1
	q := openQueue(t, up.where)
	pub := &gatePublisher{inner: &recorder{inner: q}, hold: `"ord-0-v1"`, release: make(chan struct{})}
	t.Cleanup(func() { close(pub.release) })
	r, err := outbox.NewRelay(up.st, pub, outbox.Config{Lease: 300 * time.Millisecond})
	require.NoError(t, err)
	n, err := r.RunOnce(context.Background())
	require.Equal(t, 2, n, "the other keys' events")
	require.ErrorContains(t, err, "did not return")
	var attempts int
	require.NoError(t, up.st.DB().QueryRow(`SELECT attempts FROM seqbox_outbox WHERE event_id = 'ord-0-v1'`).Scan(&attempts))
	require.Equal(t, 1, attempts, "the stuck event is its key's refusal")
}

// While a relay publishes, no other relay of its name does: a round never
// outlasts the lease it began under. Before, a round of slow publishes
// outlived the lease, the standby took over, and both published at once
// (duplicates after later events of the same key).
func TestARoundEndsBeforeItsLeaseRunsOut(t *testing.T) {
	up := openStage(t, filepath.Join(t.TempDir(), "seqbox.db"))
	emitAll(t, up, 1, 6)
	q := openQueue(t, up.where)
	rec := &recorder{inner: q}
	var mu sync.Mutex
	running, most := 0, 0
	counted := func(delay time.Duration) publishFunc {
		return func(ctx context.Context, body []byte) error {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			defer func() {
				mu.Lock()
				running--
				mu.Unlock()
			}()
			select { // a slow broker that honours its context
			case <-time.After(delay):
			case <-ctx.Done():
				return ctx.Err()
			}
			return rec.Publish(ctx, body)
		}
	}
	a, err := outbox.NewRelay(up.st, counted(150*time.Millisecond), outbox.Config{Lease: 300 * time.Millisecond})
	require.NoError(t, err)
	b, err := outbox.NewRelay(up.st, counted(0), outbox.Config{Lease: 300 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	waitfor.That(t, time.Minute, "the slow relay leading", func() bool { // a's first publish went out
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.bodies) > 0
	})
	wg.Go(func() { _ = b.Run(ctx) })
	waitfor.That(t, time.Minute, "every event published", func() bool {
		n, _, err := a.Pending(context.Background())
		return err == nil && n == 0
	})
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, most, "never two relays publishing at once")
}

// publishFunc is a Publisher of a function.
type publishFunc func(context.Context, []byte) error

func (f publishFunc) Publish(ctx context.Context, body []byte) error { return f(ctx, body) }

// A relay stopped mid-round marks what it published and gives its lease
// up: the next relay publishes the rest at once, and nothing twice.
// Before, the marks ran under the cancelled context (every event of the
// round published again) and the lease was kept (the next relay waited
// it out).
func TestARelayStoppedMidRoundMarksWhatItPublished(t *testing.T) {
	up := openStage(t, filepath.Join(t.TempDir(), "seqbox.db"))
	emitAll(t, up, 1, 4)
	q := openQueue(t, up.where)
	rec := &recorder{inner: q}
	ctx, cancel := context.WithCancel(context.Background())
	published := 0
	stopAfterTwo := publishFunc(func(pctx context.Context, body []byte) error {
		if err := rec.Publish(pctx, body); err != nil {
			return err
		}
		if published++; published == 2 {
			cancel() // the process is told to stop while it publishes
		}
		return nil
	})
	a, err := outbox.NewRelay(up.st, stopAfterTwo, outbox.Config{Lease: time.Hour})
	require.NoError(t, err)
	require.NoError(t, a.Run(ctx))
	b, err := outbox.NewRelay(up.st, rec, outbox.Config{Lease: time.Hour})
	require.NoError(t, err)
	n, err := b.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, n, "the lease was given up, and the two published are marked")
	got, dups := downstream(t, up, q)
	require.Zero(t, dups)
	exactlyOnce(t, got, 1, 4)
}

// A relay whose store is closed stops with an error that says so,
// instead of logging a failed round ten times a second for good.
func TestARelayEndsWhenItsStoreIsClosed(t *testing.T) {
	up := openStage(t, filepath.Join(t.TempDir(), "seqbox.db"))
	q := openQueue(t, up.where)
	r, err := outbox.NewRelay(up.st, q, outbox.Config{Interval: time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, up.st.Close())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = r.Run(ctx)
	require.Error(t, err)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "Run ended on its own: %v", err)
	require.ErrorContains(t, err, "closed")
}
