package embedded_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seqbox/seqbox/internal/testclock"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/embedded"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type queueBundle struct {
	path  string
	clock *testclock.Clock
	q     *embedded.Queue
}

const lease = 30 * time.Second

// setup opens a queue in a fresh file, on a fake clock, with a short
// receive wait so that empty receives return quickly.
func setup(t *testing.T) *queueBundle {
	t.Helper()
	b := &queueBundle{path: filepath.Join(t.TempDir(), "queue.db"), clock: testclock.At(time.Date(2026, 10, 9, 12, 0, 0, 0, time.UTC))}
	b.q = b.open(t, "default")
	return b
}

func (b *queueBundle) open(t *testing.T, name string) *embedded.Queue {
	t.Helper()
	q, err := embedded.Open(context.Background(), b.path, embedded.Config{
		Name: name, Lease: lease, Wait: 20 * time.Millisecond, PollInterval: 5 * time.Millisecond, Now: b.clock.Now,
	})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	return q
}

func publish(t *testing.T, q *embedded.Queue, bodies ...string) {
	t.Helper()
	for _, s := range bodies {
		require.NoError(t, q.Publish(context.Background(), []byte(s)))
	}
}

func receive(t *testing.T, q *embedded.Queue, max int) []transport.Delivery {
	t.Helper()
	ds, err := q.Receive(context.Background(), max)
	require.NoError(t, err)
	return ds
}

func bodies(ds []transport.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Body())
	}
	return out
}

func depth(t *testing.T, q *embedded.Queue) [2]int {
	t.Helper()
	ready, leased, err := q.Depth(context.Background())
	require.NoError(t, err)
	return [2]int{ready, leased}
}

func TestQueuePublishReceiveOrder(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	for i := range 5 {
		publish(t, b.q, fmt.Sprintf(`{"n":%d}`, i))
	}
	require.Equal(t, [2]int{5, 0}, depth(t, b.q))

	first := receive(t, b.q, 3)
	require.Equal(t, []string{`{"n":0}`, `{"n":1}`, `{"n":2}`}, bodies(first), "oldest first, at most max")
	for _, d := range first {
		require.Equal(t, 1, d.Attempt())
	}
	require.Equal(t, [2]int{2, 3}, depth(t, b.q))

	rest := receive(t, b.q, 10)
	require.Equal(t, []string{`{"n":3}`, `{"n":4}`}, bodies(rest), "leased messages are not handed out twice")
	require.Empty(t, receive(t, b.q, 10), "nothing ready: an empty batch, not an error")

	for _, d := range append(first, rest...) {
		require.NoError(t, d.Ack(ctx))
	}
	require.Equal(t, [2]int{0, 0}, depth(t, b.q))
}

func TestQueueBodyIsVerbatim(t *testing.T) {
	b := setup(t)
	body := []byte("{ \"id\" : \"a\",\n\t\"data\": \"\u00e9\\u0000\" }\x00\xff")
	require.NoError(t, b.q.Publish(context.Background(), body))
	ds := receive(t, b.q, 1)
	require.Len(t, ds, 1)
	require.Equal(t, body, ds[0].Body())
}

func TestQueueLeaseExpiryRedelivers(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	publish(t, b.q, "m")
	d1 := receive(t, b.q, 1)
	require.Len(t, d1, 1)
	require.Equal(t, 1, d1[0].Attempt())

	b.clock.Advance(lease - time.Second)
	require.Empty(t, receive(t, b.q, 1), "still leased")
	require.Equal(t, [2]int{0, 1}, depth(t, b.q))

	b.clock.Advance(2 * time.Second)
	require.Equal(t, [2]int{1, 0}, depth(t, b.q), "an expired lease makes the message ready again")
	d2 := receive(t, b.q, 1)
	require.Len(t, d2, 1)
	require.Equal(t, "m", string(d2[0].Body()))
	require.Equal(t, 2, d2[0].Attempt(), "every delivery counts an attempt")

	// The first holder lost its lease: it can settle nothing.
	require.ErrorIs(t, d1[0].Ack(ctx), transport.ErrLeaseLost)
	require.ErrorIs(t, d1[0].Nack(ctx, 0), transport.ErrLeaseLost)
	require.ErrorIs(t, d1[0].Extend(ctx, time.Minute), transport.ErrLeaseLost)
	require.Equal(t, [2]int{0, 1}, depth(t, b.q), "the lost lease's settle calls left the message alone")

	require.NoError(t, d2[0].Ack(ctx))
	require.Equal(t, [2]int{0, 0}, depth(t, b.q))
	require.ErrorIs(t, d2[0].Ack(ctx), transport.ErrLeaseLost, "a second ack finds nothing to settle")
}

func TestQueueNackWithDelay(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	publish(t, b.q, "m")
	d1 := receive(t, b.q, 1)
	require.Len(t, d1, 1)
	require.NoError(t, d1[0].Nack(ctx, 10*time.Second))
	require.Equal(t, [2]int{0, 1}, depth(t, b.q), "not visible before the delay")
	require.Empty(t, receive(t, b.q, 1))

	b.clock.Advance(10 * time.Second)
	d2 := receive(t, b.q, 1)
	require.Len(t, d2, 1)
	require.Equal(t, 2, d2[0].Attempt())
	require.ErrorIs(t, d1[0].Ack(ctx), transport.ErrLeaseLost, "a nack gives the lease up")

	// Nack without delay: ready at once.
	require.NoError(t, d2[0].Nack(ctx, 0))
	d3 := receive(t, b.q, 1)
	require.Len(t, d3, 1)
	require.Equal(t, 3, d3[0].Attempt())
	require.NoError(t, d3[0].Ack(ctx))
	require.Equal(t, [2]int{0, 0}, depth(t, b.q))
}

func TestQueueExtendKeepsTheLease(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	publish(t, b.q, "slow")
	d := receive(t, b.q, 1)
	require.Len(t, d, 1)

	b.clock.Advance(lease / 2)
	require.NoError(t, d[0].Extend(ctx, time.Hour))
	b.clock.Advance(lease) // past the original lease
	require.Empty(t, receive(t, b.q, 1), "an extended lease is kept")
	require.Equal(t, [2]int{0, 1}, depth(t, b.q))

	b.clock.Advance(time.Hour)
	d2 := receive(t, b.q, 1)
	require.Len(t, d2, 1, "the extension ends too")
	require.Equal(t, 2, d2[0].Attempt())
	require.ErrorIs(t, d[0].Ack(ctx), transport.ErrLeaseLost)
	require.NoError(t, d2[0].Ack(ctx))
}

func TestQueueIsDurable(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	publish(t, b.q, "a", "b")
	d := receive(t, b.q, 1)
	require.Len(t, d, 1)
	require.NoError(t, b.q.Close())

	// A consumer that died holding a lease: after reopening, the message
	// comes back once the lease expires; nothing is lost.
	q2 := b.open(t, "default")
	require.Equal(t, [2]int{1, 1}, depth(t, q2))
	got := receive(t, q2, 10)
	require.Equal(t, []string{"b"}, bodies(got))
	require.NoError(t, got[0].Ack(ctx))
	b.clock.Advance(lease + time.Second)
	again := receive(t, q2, 10)
	require.Equal(t, []string{"a"}, bodies(again))
	require.Equal(t, 2, again[0].Attempt())
	require.NoError(t, again[0].Ack(ctx))
	require.Equal(t, [2]int{0, 0}, depth(t, q2))
}

func TestQueueNamesAreSeparate(t *testing.T) {
	b := setup(t)
	other := b.open(t, "other")
	publish(t, b.q, "for-default")
	publish(t, other, "for-other")
	require.Equal(t, []string{"for-other"}, bodies(receive(t, other, 10)))
	require.Equal(t, []string{"for-default"}, bodies(receive(t, b.q, 10)))
}

// TestQueueReceiveWaitsAndHonoursContext runs in a synctest bubble: the
// clock is fake, and it moves (time.Sleep, the queue's timers) only once
// every goroutine of the bubble is blocked. So the waits measured here are
// exact fake durations, and a sleep means "once Receive is waiting".
func TestQueueReceiveWaitsAndHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "queue.db")
		q, err := embedded.Open(context.Background(), path, embedded.Config{Name: "waiting", Wait: 5 * time.Second,
			PollInterval: 5 * time.Millisecond})
		require.NoError(t, err)
		defer q.Close()

		start := time.Now()
		ds, err := q.Receive(context.Background(), 1)
		require.NoError(t, err)
		require.Empty(t, ds)
		require.GreaterOrEqual(t, time.Since(start), 5*time.Second, "waits Config.Wait before giving up")

		// A message published while Receive waits is picked up.
		type received struct {
			ds  []transport.Delivery
			err error
		}
		got := make(chan received, 1)
		go func() {
			ds, err := q.Receive(context.Background(), 1)
			got <- received{ds, err}
		}()
		synctest.Wait() // Receive found nothing and waits for its next poll
		require.NoError(t, q.Publish(context.Background(), []byte("late")))
		r := <-got
		require.NoError(t, r.err)
		require.Equal(t, []string{"late"}, bodies(r.ds))

		// A Receive whose context ends returns its error, not an empty
		// batch at the end of Config.Wait.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		start = time.Now()
		_, err = q.Receive(ctx, 1)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, time.Since(start), 5*time.Second, "a cancelled Receive does not wait out Config.Wait (fake time)")
	})
}

func TestQueueClosed(t *testing.T) {
	b := setup(t)
	publish(t, b.q, "m")
	require.NoError(t, b.q.Close())
	require.NoError(t, b.q.Close(), "closing twice is harmless")
	_, err := b.q.Receive(context.Background(), 1)
	require.ErrorIs(t, err, transport.ErrClosed)
	require.Error(t, b.q.Publish(context.Background(), []byte("after close")))
}

// A negative lease, poll interval or wait is a mistake, not a request for
// the default: Open refuses it by name before it creates anything.
func TestOpenRefusesNegativeDurations(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg   embedded.Config
		field string
	}{
		{embedded.Config{Lease: -time.Second}, "Lease"},
		{embedded.Config{PollInterval: -time.Millisecond}, "PollInterval"},
		{embedded.Config{Wait: -time.Second}, "Wait"},
	} {
		path := filepath.Join(t.TempDir(), "q.db")
		q, err := embedded.Open(context.Background(), path, c.cfg)
		if q != nil {
			require.NoError(t, q.Close())
		}
		require.ErrorContains(t, err, "embedded queue: "+c.field+": -")
		require.NoFileExists(t, path)
	}
}
