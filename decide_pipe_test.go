package seqbox_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport/embedded"
)

// pipeRig is a consumer with one worker on an embedded queue whose Decide
// reports each event it is asked for on started and holds the one named
// slow until release is closed.
type pipeRig struct {
	b       *bundle
	q       *embedded.Queue
	started chan string
	release chan struct{}
}

func newPipeRig(t *testing.T, slow string) *pipeRig {
	t.Helper()
	r := &pipeRig{b: setup(t), started: make(chan string, 4), release: make(chan struct{})}
	r.q = openQueue(t, filepath.Join(filepath.Dir(r.b.path), "queue.db"), time.Minute)
	r.b.cfg.Transport, r.b.cfg.Workers = r.q, 1
	r.b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		r.started <- ev.ID
		if ev.ID == slow {
			select {
			case <-r.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return []byte("plan for " + ev.ID), nil
	}
	return r
}

// A slow decision holds its own key, not the worker that took it: with one
// worker, a key received after a message whose Decide is still running is
// decided and applied meanwhile (Run's decide pipe, docs/design.md §10).
// Before the pipe the worker waited in its batch until the slow decision
// was in, so b stayed unread behind it.
func TestSlowDecisionDoesNotHoldTheWorker(t *testing.T) {
	r := newPipeRig(t, "a")
	b, q, started, release := r.b, r.q, r.started, r.release
	c := b.consumer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, q.Publish(ctx, keyed("a", "k1", 1)))
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	require.Equal(t, "a", <-started)
	require.NoError(t, q.Publish(ctx, keyed("b", "k2", 1)))
	select {
	case id := <-started:
		require.Equal(t, "b", id)
	case <-time.After(20 * time.Second): // a failure detector, not a timing assertion
		t.Fatal("b was not decided while a's decision ran: the worker waited for it")
	}
	waitfor.That(t, 20*time.Second, "b applied while a is being decided", func() bool { return b.effects(t, "b") == 1 })
	require.Equal(t, 0, b.effects(t, "a"), "a applied before its decision came in")
	close(release)
	waitfor.That(t, 20*time.Second, "a applied once decided", func() bool { return b.effects(t, "a") == 1 })
	cancel()
	require.NoError(t, <-errc)
}

// A key's next message, received while the one before it is decided, runs
// in the transaction that applies that one: the commit that ends a turn
// takes the next (three transactions for two versions: v1's turn, v1's
// apply with v2's turn, v2's apply), instead of the key going back to a
// worker whose own transaction takes v2's turn (four).
func TestNextMessageOfAKeyRunsInItsPredecessorsCommit(t *testing.T) {
	r := newPipeRig(t, "v1")
	c, commits := r.countingCommits(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, r.q.Publish(ctx, keyed("v1", "k", 1)))
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	require.Equal(t, "v1", <-r.started)
	require.NoError(t, r.q.Publish(ctx, keyed("v2", "k", 2)))
	waitfor.That(t, 20*time.Second, "v2 received while v1 is decided", func() bool {
		_, leased, err := r.q.Depth(ctx)
		return err == nil && leased == 2
	})
	require.Equal(t, int32(1), commits.Load(), "v1's turn")
	r.v2AfterV1InThreeCommits(t, cancel, errc, commits)
}

// The same with a key's messages in one message group, as the gateway
// publishes them: the queue hands v2 out only once v1 is acknowledged, so
// nothing brings it in while v1 is decided. The stage that applies v1
// takes it first (transport.NextTaker), still holding v1's lease, and v2's
// turn is taken in v1's commit: three transactions, where the key's next
// message used to wait for v1's ack, a receive, and a transaction of its
// own for its turn (four).
func TestNextMessageOfAGroupRunsInItsPredecessorsCommit(t *testing.T) {
	r := newPipeRig(t, "v1")
	c, commits := r.countingCommits(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, r.q.PublishGrouped(ctx, [][]byte{keyed("v1", "k", 1), keyed("v2", "k", 2)}, []string{"k:k", "k:k"}))
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	require.Equal(t, "v1", <-r.started)
	ready, leased, err := r.q.Depth(ctx)
	require.NoError(t, err)
	require.Equal(t, [2]int{1, 1}, [2]int{ready, leased}, "v2 waits in the queue while v1 is held")
	require.Equal(t, int32(1), commits.Load(), "v1's turn")
	r.v2AfterV1InThreeCommits(t, cancel, errc, commits)
}

// The next message of a group is taken only for a head whose decision
// came in: a head whose decision failed is nacked by its stage, and a
// successor taken with it would be parked behind it as held, with a hold
// deadline, where before it waited in the queue behind its group's head
// for as long as that one retried (docs/design.md §10.4). v1's decision
// fails (backoff an hour); v2 stays in the queue, unreceived.
func TestNextMessageOfAGroupStaysQueuedBehindAFailedDecision(t *testing.T) {
	r := newPipeRig(t, "")
	r.b.cfg.Retry = seqbox.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Hour, MaxBackoff: time.Hour}
	r.b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		return nil, errors.New("the model answered 503")
	}
	var mu sync.Mutex
	var seen []string
	r.b.cfg.Observer = func(res seqboxtype.Result) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, res.ID+":"+string(res.Outcome))
	}
	c := r.b.consumer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, r.q.PublishGrouped(ctx, [][]byte{keyed("v1", "k", 1), keyed("v2", "k", 2)}, []string{"k:k", "k:k"}))
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	waitfor.That(t, 20*time.Second, "v1's failed decision applied as a retry", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(seen, "v1:retry")
	})
	mu.Lock()
	require.Equal(t, []string{"v1:retry"}, seen, "v2 reached no outcome: it was not taken")
	mu.Unlock()
	ready, leased, err := r.q.Depth(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, ready+leased, "v1 waits out its backoff and v2 waits in the queue behind it")
	cancel()
	require.NoError(t, <-errc)
}

// countingCommits is r's consumer, its commits counted.
func (r *pipeRig) countingCommits(t *testing.T) (*seqbox.Consumer, *atomic.Int32) {
	var commits atomic.Int32
	c := r.b.armedConsumer(t, func(p fault.Point) error {
		if p == fault.BeforeCommit {
			commits.Add(1)
		}
		return nil
	})
	return c, &commits
}

// v2AfterV1InThreeCommits lets v1's decision through, then requires v2
// decided and applied after it, and three commits in all: v1's turn; v1
// applied with v2's turn; v2 applied. It stops the run (cancel, errc).
func (r *pipeRig) v2AfterV1InThreeCommits(t *testing.T, cancel context.CancelFunc, errc chan error, commits *atomic.Int32) {
	close(r.release)
	waitfor.That(t, 20*time.Second, "v2 applied", func() bool { return r.b.effects(t, "v2") == 1 })
	require.Equal(t, "v2", <-r.started)
	cancel()
	require.NoError(t, <-errc)
	require.Equal(t, int32(3), commits.Load(), "v1's turn; v1 applied with v2's turn; v2 applied")
	require.Equal(t, 1, r.b.effects(t, "v1"))
}

// A crash injected in a stage's commit stops Run at once, with the
// crash, on PostgreSQL too: when the pipe ran an applier per worker
// there, the other appliers, idle, waited for more work, and Run with
// them.
func TestCrashInAStageStopsRunOnPostgres(t *testing.T) {
	ctx := context.Background()
	var commits atomic.Int32
	c, _, q := pgQueued(t, "stage-crash", embedded.Config{}, seqbox.Config{Workers: 4,
		Decide: func(context.Context, seqboxtype.Event) ([]byte, error) { return []byte("plan"), nil }},
		func(p fault.Point) error {
			if p == fault.BeforeCommit && commits.Add(1) == 2 { // the turn's commit, then the stage's
				return fault.ErrCrash
			}
			return nil
		})
	require.NoError(t, q.Publish(ctx, keyed("m1", "k", 1)))
	runCrashing(t, c)
}

// A key's next message is not taken into a stage behind a message of the
// key with no decision yet (one that went with its predecessor,
// afterPredecessor): that one only takes its turn in the stage, and a
// message taken behind it could only go with it again, a pass through
// the pipeline for nothing, once in every stage of the key. The agent
// bench's 300 ms runs whose first receive caught two versions of each key
// ran a third more passes in their stages, and lost a tenth of their
// efficiency (docs/benchmarks-history.md §27). v1 and v2 of k come in one
// batch (x1 and y1 with them, so that the batch takes two of a key), v3
// while v1 is decided. Once v1's decision is in: three commits (v1
// applied with v2's turn; v2 applied with v3's; v3 applied) and five
// passes (v1, v2; v2, v3; v3), not six.
func TestNextMessageIsNotTakenBehindAnUndecidedOne(t *testing.T) {
	r := newPipeRig(t, "v1")
	var commits, passes atomic.Int32
	c := r.b.armedConsumer(t, func(p fault.Point) error {
		switch p {
		case fault.BeforeCommit:
			commits.Add(1)
		case fault.AfterInboxInsert:
			passes.Add(1)
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, r.q.PublishBatch(ctx, [][]byte{keyed("v1", "k", 1), keyed("v2", "k", 2), keyed("x1", "x", 1), keyed("y1", "y", 1)}))
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	var asked []string
	for range 3 {
		asked = append(asked, <-r.started)
	}
	require.ElementsMatch(t, []string{"v1", "x1", "y1"}, asked)
	waitfor.That(t, 20*time.Second, "x1 and y1 applied", func() bool { return r.b.effects(t, "x1") == 1 && r.b.effects(t, "y1") == 1 })
	require.Equal(t, int32(6), passes.Load(), "v1, v2, x1 and y1 in one batch (v2 with v1), then x1 and y1 applied")
	c0, p0 := commits.Load(), passes.Load()
	require.NoError(t, r.q.Publish(ctx, keyed("v3", "k", 3)))
	waitfor.That(t, 20*time.Second, "v3 received while v1 is decided", func() bool {
		_, leased, err := r.q.Depth(ctx)
		return err == nil && leased == 3
	})
	close(r.release)
	waitfor.That(t, 20*time.Second, "v3 applied", func() bool { return r.b.effects(t, "v3") == 1 })
	require.Equal(t, "v2", <-r.started)
	require.Equal(t, "v3", <-r.started)
	cancel()
	require.NoError(t, <-errc)
	require.Equal(t, int32(3), commits.Load()-c0, "v1 applied with v2's turn; v2 applied with v3's; v3 applied")
	require.Equal(t, int32(5), passes.Load()-p0, "passes through the pipeline: v1, v2; v2, v3; v3")
	for _, id := range []string{"v1", "v2", "v3"} {
		require.Equal(t, 1, r.b.effects(t, id), id)
	}
}

// A stage whose transaction fails, without a crash, fails its own
// messages only: commitAndSettle nacks them for redelivery and the
// applier goes on with the next stage. Ending the applier there (a
// mutant of decide_pipe.go that took any failure for a shutdown)
// survived every test before this one; every later decision then waited
// for a stage that never came, its key pinned for good.
func TestApplierGoesOnAfterAFailedStage(t *testing.T) {
	r := newPipeRig(t, "")
	var armed atomic.Bool
	failed := make(chan struct{})
	decide := r.b.cfg.Decide
	r.b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		out, err := decide(ctx, ev)
		if ev.ID == "bad" {
			armed.Store(true) // the next commit is its stage's
		}
		return out, err
	}
	c := r.b.armedConsumer(t, func(p fault.Point) error {
		if p == fault.BeforeCommit && armed.CompareAndSwap(true, false) {
			close(failed)
			return errors.New("the store refused the commit (injected)")
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, r.q.Publish(ctx, keyed("bad", "k1", 1)))
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	require.Equal(t, "bad", <-r.started)
	<-failed
	require.NoError(t, r.q.Publish(ctx, keyed("good", "k2", 1)))
	require.Equal(t, "good", <-r.started)
	waitfor.That(t, 20*time.Second, "good applied after the failed stage", func() bool { return r.b.effects(t, "good") == 1 })
	waitfor.That(t, 20*time.Second, "bad applied once redelivered", func() bool { return r.b.effects(t, "bad") == 1 })
	cancel()
	require.NoError(t, <-errc)
}

// The pipe ends each batch it was handed once the last of its messages
// is through, successors it took into a stage included, and the
// scheduler's room for deliveries in flight (Workers x BatchSize x 2)
// comes back with it; a successor taken into a stage leaves the ones
// after it where they were. With one worker taking two deliveries at a
// time, three keys' three versions each all apply. Before this test,
// mutants that broke either survived every test (decide_pipe.go: a pipe
// whose count of a batch's messages was off by a message through, a
// successor joined or a message stopped again never ended the batch,
// and receiving stopped for good once the room was taken; scheduler.go:
// adopting the next of three received deliveries dropped the third,
// which came back only when its lease ran out).
func TestPipeGivesBackTheRoomOfItsBatches(t *testing.T) {
	r := newPipeRig(t, "")
	r.b.cfg.BatchSize = 2
	var asked atomic.Int32
	r.b.cfg.Decide = func(context.Context, seqboxtype.Event) ([]byte, error) {
		asked.Add(1)
		return []byte("plan"), nil
	}
	c := r.b.consumer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const keys, versions = 3, 3
	for k := range keys {
		for v := 1; v <= versions; v++ {
			require.NoError(t, r.q.Publish(ctx, keyed(fmt.Sprint("k", k, "v", v), fmt.Sprint("k", k), v)))
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	waitfor.That(t, 20*time.Second, "every event applied", func() bool { return r.b.effects(t, "") == keys*versions })
	cancel()
	require.NoError(t, <-errc)
	require.Equal(t, int32(keys*versions), asked.Load(), "each decided once")
}
