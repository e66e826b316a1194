package seqbox_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/embedded"
)

// These tests run the inbox end to end: the real embedded queue, the real
// SQLite store and Consumer.Run, interrupted in each failure window of the
// seed. What they check is what the seed asks to check after every
// interruption: inbox rows, business effects, and the message's state at
// the broker.

const queueLease = 200 * time.Millisecond

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// openQueue opens an embedded queue with a short lease in the file at path
// (the store's own file, or another one).
func openQueue(t *testing.T, path string, lease time.Duration) *embedded.Queue {
	t.Helper()
	q, err := embedded.Open(context.Background(), path, embedded.Config{
		Lease: lease, Wait: 50 * time.Millisecond, PollInterval: 5 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	return q
}

func taskEvent(id string) []byte {
	return fmt.Appendf(nil, `{"specversion":"1.0","id":%q,"source":"crm","type":"task.create","data":{"task":"follow up"}}`, id)
}

func publishTasks(t *testing.T, q *embedded.Queue, ids ...string) {
	t.Helper()
	for _, id := range ids {
		require.NoError(t, q.Publish(context.Background(), taskEvent(id)))
	}
}

func taskIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return ids
}

// unacked is what the queue still holds: ready plus leased.
func unacked(t *testing.T, q *embedded.Queue) int {
	t.Helper()
	ready, leased, err := q.Depth(context.Background())
	require.NoError(t, err)
	return ready + leased
}

// runCrashing runs c until it stops, and requires that it stopped because
// of an injected crash.
func runCrashing(t *testing.T, c *seqbox.Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := c.Run(ctx)
	require.ErrorIs(t, err, fault.ErrCrash, "Run must stop at the injected crash, not time out")
	require.True(t, fault.IsCrash(err))
}

// runUntil runs c until done reports true, then shuts it down and returns
// what Run returned.
func runUntil(t *testing.T, c *seqbox.Consumer, done func() bool) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		select {
		case err := <-errc:
			t.Fatalf("Run returned before the work was done: %v", err)
		case <-deadline:
			cancel()
			<-errc
			t.Fatalf("the work was not done in time")
		case <-tick.C:
		}
	}
	cancel()
	return <-errc
}

// requireAllAppliedOnce checks the end state: every message applied exactly
// once, its identity recorded as applied, and the queue empty.
func requireAllAppliedOnce(t *testing.T, b *bundle, q *embedded.Queue, ids []string) {
	t.Helper()
	for _, id := range ids {
		require.Equal(t, 1, b.effects(t, id), "effects of %s", id)
	}
	require.Equal(t, len(ids), b.effects(t, ""))
	counts, err := b.store.Executor().Counts(context.Background(), b.cfg.Name)
	require.NoError(t, err)
	require.Equal(t, int64(len(ids)), counts.InboxRows)
	require.Equal(t, int64(len(ids)), counts.Applied)
	require.Equal(t, 0, unacked(t, q), "every message acknowledged")
}

func crashingAt(p fault.Point) func(fault.Point) error {
	return func(q fault.Point) error {
		if q == p {
			return fault.ErrCrash
		}
		return nil
	}
}

func TestQueueCrashWindows(t *testing.T) {
	for _, p := range []fault.Point{
		fault.BeforeTx, fault.AfterInboxInsert, fault.AfterHandler,
		fault.BeforeCommit, fault.AfterCommit,
	} {
		// The queue in a file of its own is any broker: the ACK follows the
		// COMMIT. In the store's own file, the ACK commits with the batch,
		// and the window between them is gone.
		for _, shared := range []bool{false, true} {
			name := string(p) + "/queue_in_own_file"
			if shared {
				name = string(p) + "/queue_in_store_file"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				testCrashWindow(t, p, shared)
			})
		}
	}

	t.Run(string(fault.MidBatch), func(t *testing.T) {
		t.Parallel()
		testQueueMidBatchCrash(t)
	})
}

// receiveWatcher wraps a transport and closes ready the first time Receive
// is called after at least want deliveries were handed out: by then the
// consumer has queued all of them.
type receiveWatcher struct {
	transport.Transport
	want  int
	mu    sync.Mutex
	got   int
	ready chan struct{}
	done  bool
}

func (w *receiveWatcher) Receive(ctx context.Context, max int) ([]transport.Delivery, error) {
	w.mu.Lock()
	if w.got >= w.want && !w.done {
		w.done = true
		close(w.ready)
	}
	w.mu.Unlock()
	ds, err := w.Transport.Receive(ctx, max)
	w.mu.Lock()
	w.got += len(ds)
	w.mu.Unlock()
	return ds, err
}

// testQueueMidBatchCrash crashes in the middle of a batch of four: the two
// deliveries already run in the batch's transaction are rolled back with
// it, and none of the four is acknowledged.
func testQueueMidBatchCrash(t *testing.T) {
	b := setup(t)
	q := openQueue(t, b.path, queueLease)
	w := &receiveWatcher{Transport: q, want: 5, ready: make(chan struct{})}
	b.cfg.Transport, b.cfg.Logger = w, quietLogger

	entered := make(chan struct{})
	var beforeTx, midBatch atomic.Int32
	crashing := b.cfg
	crashing.Workers, crashing.BatchSize = 1, 8
	var hook fault.Hook = func(p fault.Point) error {
		switch p {
		case fault.BeforeTx:
			// The first batch holds one message; keep it from committing
			// until the other four are queued behind it, so that they form
			// the next batch together.
			if beforeTx.Add(1) == 1 {
				close(entered)
				select {
				case <-w.ready:
				case <-time.After(10 * time.Second):
				}
			}
		case fault.MidBatch:
			midBatch.Add(1)
			return fault.ErrCrash
		}
		return nil
	}
	c, err := seqbox.NewConsumer(armed(crashing, hook))
	require.NoError(t, err)

	publishTasks(t, q, "first")
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		errc <- c.Run(ctx)
	}()
	select {
	case <-entered:
	case err := <-errc:
		t.Fatalf("Run returned before the first batch: %v", err)
	}
	rest := taskIDs("m", 4)
	publishTasks(t, q, rest...)
	err = <-errc
	require.ErrorIs(t, err, fault.ErrCrash)
	require.Equal(t, int32(1), midBatch.Load())

	require.Equal(t, 1, b.effects(t, "first"), "the batch before the crash committed")
	require.Equal(t, 1, b.effects(t, ""), "the crashed batch left no effect")
	require.Equal(t, int64(1), b.inboxRows(t), "nor any identity")
	require.Equal(t, 4, unacked(t, q), "the crashed batch is still at the broker")

	restarted := b.consumer(t)
	require.NoError(t, runUntil(t, restarted, func() bool { return unacked(t, q) == 0 && b.effects(t, "") == 5 }))
	requireAllAppliedOnce(t, b, q, append([]string{"first"}, rest...))
}

// redeliveryWatcher counts redeliveries (attempt > 1) handed out while
// busy is set.
type redeliveryWatcher struct {
	transport.Transport
	busy       *atomic.Bool
	duringBusy atomic.Int32
}

func (w *redeliveryWatcher) Receive(ctx context.Context, max int) ([]transport.Delivery, error) {
	ds, err := w.Transport.Receive(ctx, max)
	for _, d := range ds {
		if d.Attempt() > 1 && w.busy.Load() {
			w.duringBusy.Add(1)
		}
	}
	return ds, err
}

// TestQueueLeaseExpiresDuringSlowHandler: the lock expires while the first
// attempt still runs (a model call slower than the lease, with no lease
// extension in time), so the broker hands the message to another worker.
// The redelivery must not apply a second time.
func TestQueueLeaseExpiresDuringSlowHandler(t *testing.T) {
	b := setup(t)
	// The queue lives in its own file, so that receiving is not held up by
	// the store's write transaction and the redelivery really arrives
	// while the first attempt runs.
	q := openQueue(t, filepath.Join(t.TempDir(), "queue.db"), queueLease)
	var busy atomic.Bool
	w := &redeliveryWatcher{Transport: q, busy: &busy}

	var calls atomic.Int32
	record := replay.RecordHandler(b.cfg.Name)
	var mu sync.Mutex
	var results []seqboxtype.Result
	b.cfg.Transport, b.cfg.Logger = w, quietLogger
	b.cfg.Workers = 4
	b.cfg.ExtendEvery = time.Hour // no extension before the lease runs out
	b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		if calls.Add(1) == 1 {
			busy.Store(true)
			defer busy.Store(false)
			select {
			case <-time.After(4 * queueLease):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return record(ctx, tx, ev)
	}
	b.cfg.Observer = func(res seqboxtype.Result) {
		mu.Lock()
		defer mu.Unlock()
		results = append(results, res)
	}
	publishTasks(t, q, "slow-1")

	c := b.consumer(t)
	require.NoError(t, runUntil(t, c, func() bool { return unacked(t, q) == 0 && b.effects(t, "") >= 1 }))

	require.Positive(t, w.duringBusy.Load(), "the message was redelivered while the first attempt ran")
	require.Equal(t, int32(1), calls.Load(), "only the first attempt reached the handler")
	require.Equal(t, 1, b.effects(t, "slow-1"))
	require.Equal(t, int64(1), b.inboxRows(t))
	mu.Lock()
	defer mu.Unlock()
	byOutcome := map[seqboxtype.Outcome]int{}
	for _, res := range results {
		byOutcome[res.Outcome]++
	}
	require.Equal(t, 1, byOutcome[seqboxtype.Applied])
	require.Positive(t, byOutcome[seqboxtype.Duplicate], "the redeliveries were recognised as duplicates")
	require.Equal(t, len(results), byOutcome[seqboxtype.Applied]+byOutcome[seqboxtype.Duplicate])
}

// TestQueueGracefulShutdown: a worker is stopped (deploy, scale-in) while
// deliveries are queued and a batch is in flight. Nothing is half-applied,
// and a second consumer finishes the work, each message exactly once.
func TestQueueGracefulShutdown(t *testing.T) {
	b := setup(t)
	// A lease longer than a batch, so that no committed delivery loses its
	// lease before its ack and the queue depth is exact.
	q := openQueue(t, b.path, 2*time.Second)
	ids := taskIDs("evt", 30)
	publishTasks(t, q, ids...)

	record := replay.RecordHandler(b.cfg.Name)
	slow := b.cfg
	slow.Transport, slow.Logger = q, quietLogger
	slow.Workers, slow.BatchSize = 2, 4
	slow.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		select {
		case <-time.After(15 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		return record(ctx, tx, ev)
	}
	c, err := seqbox.NewConsumer(slow)
	require.NoError(t, err)
	require.NoError(t, runUntil(t, c, func() bool { return b.effects(t, "") >= 3 }), "a cancelled Run shuts down cleanly")

	// Nothing half-applied: every recorded identity has its effect, no
	// effect lacks its identity, and what committed was acknowledged.
	applied := b.effects(t, "")
	require.Less(t, applied, len(ids), "the shutdown came before the work was done")
	counts, err := b.store.Executor().Counts(context.Background(), b.cfg.Name)
	require.NoError(t, err)
	require.Equal(t, int64(applied), counts.InboxRows)
	require.Equal(t, int64(applied), counts.Applied)
	for _, id := range ids {
		require.LessOrEqual(t, b.effects(t, id), 1, id)
	}
	require.Equal(t, len(ids)-applied, unacked(t, q), "committed deliveries were acked; the others are still at the broker")

	// The replacement worker finishes the job.
	b.cfg.Transport, b.cfg.Logger = q, quietLogger
	next := b.consumer(t)
	require.NoError(t, runUntil(t, next, func() bool { return unacked(t, q) == 0 && b.effects(t, "") == len(ids) }))
	requireAllAppliedOnce(t, b, q, ids)
}

// testCrashWindow crashes a consumer at p, then restarts one and checks
// that every message applies exactly once: the inbox absorbs what had
// committed. shared puts the queue in the store's own file.
func testCrashWindow(t *testing.T, p fault.Point, shared bool) {
	b := setup(t)
	qpath := filepath.Join(t.TempDir(), "queue.db")
	if shared {
		qpath = b.path
	}
	q := openQueue(t, qpath, queueLease)
	b.cfg.Transport, b.cfg.Logger = q, quietLogger
	ids := taskIDs("evt", 3)
	publishTasks(t, q, ids...)

	c, err := seqbox.NewConsumer(armed(b.cfg, crashingAt(p)))
	require.NoError(t, err)
	runCrashing(t, c)

	committed := b.effects(t, "")
	require.Equal(t, int64(committed), b.inboxRows(t), "identity and effect commit together")
	if p == fault.AfterCommit {
		require.Positive(t, committed, "the batch committed before the crash")
	} else {
		require.Zero(t, committed, "nothing commits before this crash point")
	}
	// Right after the crash, what committed is acknowledged only when the
	// acknowledgement was part of the commit; everything else is still at
	// the broker, leased or ready.
	acked := 0
	if shared {
		acked = committed
	}
	require.Equal(t, len(ids)-acked, unacked(t, q), "a crash acks nothing outside a commit")

	// A restarted consumer gets the redeliveries once the leases expire;
	// the inbox absorbs whatever had committed and was not acknowledged.
	var mu sync.Mutex
	seen := map[seqboxtype.Outcome]int{}
	b.cfg.Observer = func(res seqboxtype.Result) {
		mu.Lock()
		defer mu.Unlock()
		seen[res.Outcome]++
	}
	restarted := b.consumer(t)
	require.NoError(t, runUntil(t, restarted, func() bool {
		return unacked(t, q) == 0 && b.effects(t, "") == len(ids)
	}))
	requireAllAppliedOnce(t, b, q, ids)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, len(ids)-committed, seen[seqboxtype.Applied])
	require.Equal(t, committed-acked, seen[seqboxtype.Duplicate], "each committed, unacknowledged message comes back as a duplicate")
}
