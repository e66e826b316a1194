package seqbox_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// lookCount is a store whose executors count their DecisionLook calls.
type lookCount struct {
	store.Store
	looks *atomic.Int64
}

// OneWriter is the wrapped store's.
func (s lookCount) OneWriter() bool {
	ow, ok := s.Store.(interface{ OneWriter() bool })
	return ok && ow.OneWriter()
}

func (s lookCount) Executor() store.Executor {
	return lookCountExecutor{Executor: s.Store.Executor(), looks: s.looks}
}

type lookCountExecutor struct {
	store.Executor
	looks *atomic.Int64
}

func (e lookCountExecutor) DecisionLook(ctx context.Context, p store.MessageRef) (store.DecisionLook, error) {
	e.looks.Add(1)
	return e.Executor.DecisionLook(ctx, p)
}

// On a store with one writer, a decider whose own transaction claimed the
// message less than a heartbeat ago asks without looking again: that
// transaction read no decision under the same writer, and nothing can
// record one or settle the identity under its live claim. An older claim
// is looked at, and on PostgreSQL (READ COMMITTED) every claim is.
func TestDeciderLooksAgainOnlyWhereItsClaimMayHaveChanged(t *testing.T) {
	for _, c := range []struct {
		name      string
		bundle    func(*testing.T) *bundle
		heartbeat time.Duration
		looks     int64
	}{
		{"sqlite fresh claim", setup, time.Minute, 0},
		{"sqlite claim older than a heartbeat", setup, time.Nanosecond, 1},
		{"postgres fresh claim", setupPostgres, time.Minute, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.bundle(t)
			a := newAgent()
			var looks atomic.Int64
			b.cfg.Store, b.cfg.Decide, b.cfg.ClaimHeartbeat = lookCount{Store: b.store, looks: &looks}, a.decide, c.heartbeat
			results := mustDeliver(t, b.consumer(t), []byte(`{"id":"e1","source":"crm","type":"t","partitionkey":"opp","objectversion":1}`), 1)
			require.Equal(t, []string{"e1:applied"}, outcomes(results))
			require.Equal(t, []string{"e1"}, a.called())
			require.Equal(t, c.looks, looks.Load())
		})
	}
}

// commitGate is a store whose next batch commit, once armed, waits after
// committing until release is closed (reached says it got there).
type commitGate struct {
	store.Store
	armed            *atomic.Bool
	reached, release chan struct{}
}

// OneWriter is the wrapped store's.
func (s commitGate) OneWriter() bool {
	ow, ok := s.Store.(interface{ OneWriter() bool })
	return ok && ow.OneWriter()
}

func (s commitGate) Begin(ctx context.Context) (store.ExecutorTx, error) {
	tx, err := s.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return gatedTx{ExecutorTx: tx, g: s}, nil
}

type gatedTx struct {
	store.ExecutorTx
	g commitGate
}

func (t gatedTx) Commit() error {
	err := t.ExecutorTx.Commit()
	if t.g.armed.CompareAndSwap(true, false) {
		close(t.g.reached)
		<-t.g.release
	}
	return err
}

// Two copies of one message in one process share its claim (one owner
// per process): the second's transaction found the claim the first's
// call held, and took it as its own. Should that call end before the
// second copy reaches its decider, the decision is recorded and the
// claim gone; the second copy must not take its claim for a fresh one of
// its own and ask again without looking.
func TestCopyWhoseClaimWasItsTwinsLooksBeforeItAsks(t *testing.T) {
	for _, c := range []struct {
		name   string
		bundle func(*testing.T) *bundle
	}{{"sqlite", setup}, {"postgres", setupPostgres}} {
		t.Run(c.name, func(t *testing.T) {
			b := c.bundle(t)
			a := newAgent()
			a.block["e1"] = make(chan struct{})
			gate := commitGate{Store: b.store, armed: new(atomic.Bool), reached: make(chan struct{}), release: make(chan struct{})}
			b.cfg.Store, b.cfg.Decide, b.cfg.ClaimHeartbeat = gate, a.decide, time.Minute
			cons := b.consumer(t)
			ev := []byte(`{"id":"e1","source":"crm","type":"t","partitionkey":"opp","objectversion":1}`)
			first := make(chan []seqboxtype.Result, 1)
			go func() { first <- mustDeliver(t, cons, ev, 1) }()
			require.Equal(t, "e1", <-a.started)

			gate.armed.Store(true)
			second := make(chan []seqboxtype.Result, 1)
			go func() { second <- mustDeliver(t, cons, ev, 2) }()
			<-gate.reached // the second copy committed its claim: the first's
			close(a.block["e1"])
			require.Equal(t, []string{"e1:applied"}, outcomes(<-first))
			close(gate.release)
			require.Equal(t, []string{"e1:duplicate"}, outcomes(<-second))
			require.Equal(t, []string{"e1"}, a.called(), "the agent is asked once")
		})
	}
}
