package seqbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// wrapped is a test's store around another: it says OneWriter as the
// store it wraps does (the pipeline takes its rules from it).
type wrapped struct{ store.Store }

// OneWriter is the wrapped store's.
func (s wrapped) OneWriter() bool {
	ow, ok := s.Store.(interface{ OneWriter() bool })
	return ok && ow.OneWriter()
}

// lookCount is a store whose executors count their DecisionLook calls.
type lookCount struct {
	wrapped
	looks *atomic.Int64
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

// A decider whose own transaction claimed the message less than a
// heartbeat ago asks without looking again: on a store with one writer
// that transaction read no decision under the same writer, on PostgreSQL
// (READ COMMITTED) it read the look in a statement after its claim; and
// nothing can record a decision or settle the identity under its live
// claim. An older claim is looked at.
func TestDeciderLooksAgainOnlyWhereItsClaimMayHaveChanged(t *testing.T) {
	for _, c := range []struct {
		name      string
		bundle    func(*testing.T) *bundle
		heartbeat time.Duration
		looks     int64
	}{
		{"sqlite fresh claim", setup, time.Minute, 0},
		{"sqlite claim older than a heartbeat", setup, time.Nanosecond, 1},
		{"postgres fresh claim", setupPostgres, time.Minute, 0},
		{"postgres claim older than a heartbeat", setupPostgres, time.Nanosecond, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.bundle(t)
			a := newAgent()
			var looks atomic.Int64
			b.cfg.Store, b.cfg.Decide, b.cfg.ClaimHeartbeat = lookCount{wrapped: wrapped{b.store}, looks: &looks}, a.decide, c.heartbeat
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
	wrapped
	armed            *atomic.Bool
	reached, release chan struct{}
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
	for _, c := range bothStores {
		t.Run(c.name, func(t *testing.T) {
			b := c.bundle(t)
			a := newAgent()
			a.block["e1"] = make(chan struct{})
			gate := commitGate{wrapped: wrapped{b.store}, armed: new(atomic.Bool), reached: make(chan struct{}), release: make(chan struct{})}
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

// On PostgreSQL a batch's reads are not one snapshot (READ COMMITTED).
// Another process that holds the identity's claim records its decision
// (dropping the claim) while the batch, which read no decision, claims
// the identity: the batch's claim waits for that record's row lock, and
// succeeds once it commits. Only a read that starts after the claim sees
// the decision: the batch's look after its claims, in the same
// transaction. The agent is then not asked again; a look before the
// claims, or none, asks it twice.
func TestDecisionRecordedWhileTheBatchClaimsIsNotAskedAgainOnPostgres(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(map[bool]string{false: "statements sent together", true: "statements one by one"}[direct], func(t *testing.T) {
			ctx := context.Background()
			b := setupPostgres(t)
			a := newAgent()
			if direct {
				// A handler that takes its tx for a *sql.Tx has the
				// batches' statements sent one by one from then on.
				record := b.cfg.Handler
				b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
					_ = tx.(*sql.Tx)
					return record(ctx, tx, ev)
				}
			}
			raw := []byte(`{"id":"e1","source":"crm","type":"t","partitionkey":"opp","objectversion":1}`)
			ev, err := seqboxtype.ParseEvent(raw)
			require.NoError(t, err)
			// The other process's claim, alive.
			now := time.Now()
			claim, err := b.store.Executor().DecisionClaim(ctx, store.DecisionClaimParams{Consumer: b.cfg.Name, Source: "crm", ID: "e1",
				Owner: "other", Now: now, Until: now.Add(time.Hour)})
			require.NoError(t, err)
			require.True(t, claim.Claimed)
			committed := make(chan error, 1)
			record := func() {
				// Its record, begun before the batch's claim and committed
				// once that claim waits for it.
				tx, err := b.store.Begin(ctx)
				require.NoError(t, err)
				_, err = tx.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: b.cfg.Name, Source: "crm", ID: "e1",
					Decision: []byte(`"elsewhere"`), PayloadHash: ev.Hash, At: time.Now(), Owner: "other"})
				require.NoError(t, err)
				go func() {
					waitfor.That(t, time.Minute, "the batch's claim waiting for the record's lock", func() bool {
						var waiting int
						err := b.store.DB().QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
						return err == nil && waiting > 0
					})
					committed <- tx.Commit()
				}()
			}
			b.cfg.Store, b.cfg.Decide, b.cfg.ClaimHeartbeat = claimHook{wrapped: wrapped{b.store}, id: "e1", before: record, once: new(sync.Once)}, a.decide, time.Minute
			cons := b.consumer(t)
			if direct {
				// Another key's message reaches the handler first.
				require.Equal(t, []string{"e0:applied"}, outcomes(mustDeliver(t, cons, []byte(`{"id":"e0","source":"crm","type":"t","partitionkey":"other","objectversion":1}`), 1)))
			}
			results := mustDeliver(t, cons, raw, 1)
			require.NoError(t, <-committed, "the other process's record")
			require.Equal(t, []string{"e1:applied"}, outcomes(results))
			require.NotContains(t, a.called(), "e1", "the agent is not asked: the decision was recorded elsewhere")
		})
	}
}

// claimHook is a PostgreSQL store whose batch transactions run before
// once, just before the first claim statement of identity id is made
// (and sent): in a pipeline, or alone.
type claimHook struct {
	wrapped
	id     string
	before func()
	once   *sync.Once
}

// claiming runs before once when p claims s.id.
func (s claimHook) claiming(p store.DecisionClaimManyParams) {
	for _, id := range p.IDs {
		if id.ID == s.id {
			s.once.Do(s.before)
		}
	}
}

func (s claimHook) Begin(ctx context.Context) (store.ExecutorTx, error) {
	tx, err := s.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	pl, ok := tx.(store.Pipeliner)
	if !ok {
		tx.Rollback()
		return nil, fmt.Errorf("claimHook: %T is not a store.Pipeliner (PostgreSQL's are)", tx)
	}
	return claimHookPipe{Pipeliner: pl, s: s}, nil
}

type claimHookPipe struct {
	store.Pipeliner
	s claimHook
}

func (t claimHookPipe) DecisionClaimMany(ctx context.Context, p store.DecisionClaimManyParams) (map[store.Identity]bool, error) {
	t.s.claiming(p)
	return t.Pipeliner.DecisionClaimMany(ctx, p)
}

func (t claimHookPipe) DecisionClaimStatement(p store.DecisionClaimManyParams, claimed map[store.Identity]bool) store.Statement {
	t.s.claiming(p)
	return t.Pipeliner.DecisionClaimStatement(p, claimed)
}

// An identity that settled elsewhere while its decider waited for a
// concurrency slot is not sent to the agent. The process's one slot is
// taken by another message's Decide; m's decider waits for it, its claim
// (taken by m's transaction) unrenewed until it runs out. Another
// process's copy of m takes the claim over, asks, and the agent refuses it
// for good: m is dead-lettered, with no decision recorded. When the slot
// frees, the waiting decider claims m again and looks: m is final
// elsewhere, so asking now would reach the agent a second time for a
// message already settled (out of its key's order). It does not ask; its
// run again finds m settled. Covers the look after the claim in
// decideOnce, for an identity settled without a decision (finalElsewhere).
func TestAnIdentityFinalElsewhereWhileItWaitedForASlotIsNotAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAgent()
		releaseX := make(chan struct{})
		a.block["x"] = releaseX
		a.fail["m"] = 1 // the other process's ask of m fails, for good (below)
		cfg, closeStore := slowDecideConfig(t, &slowModel{release: make(chan struct{})})
		defer closeStore()
		var wg sync.WaitGroup
		defer wg.Wait()
		defer closeOpen(releaseX)
		cfg.Decide, cfg.DecideConcurrency = a.decide, 1
		first, err := seqbox.NewConsumer(cfg)
		require.NoError(t, err)
		otherCfg := cfg
		otherCfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
			out, err := a.decide(ctx, ev)
			if err != nil {
				return nil, seqbox.Permanent(err) // the agent refuses it
			}
			return out, nil
		}
		other, err := seqbox.NewConsumer(otherCfg) // another process
		require.NoError(t, err)
		msg := unversioned("m", "opp")

		xDone := deliverAt(&wg, first, unversioned("x", "other"), 1)
		require.Equal(t, "x", <-a.started) // x's Decide holds the process's only slot
		mDone := deliverAt(&wg, first, msg, 1)
		synctest.Wait() // m's transaction claimed it; its decider waits for the slot
		require.Equal(t, []string{"x"}, a.called())
		// Longer than the claim lives: nothing renews it while it waits.
		time.Sleep(3*time.Second + 500*time.Millisecond)

		results, err := other.Deliver(context.Background(), msg, 2)
		require.NoError(t, err)
		require.Equal(t, []string{"m:dead_lettered"}, outcomes(results), "the other process took the claim over and the agent refused m")
		require.Equal(t, "m", <-a.started)

		close(releaseX)
		require.Equal(t, []string{"x:applied"}, outcomes(<-xDone))
		results = <-mDone
		require.Equal(t, []string{"x", "m"}, a.called(), "m, dead-lettered elsewhere while its decider waited for a slot, was sent to the agent again")
		require.Equal(t, []string{"m:duplicate"}, outcomes(results), "its run again finds m settled: %s", results[0].Reason)
		seen, err := cfg.Store.Executor().InboxSeen(context.Background(), store.MessageRef{Consumer: cfg.Name, Source: "crm", ID: "m"})
		require.NoError(t, err)
		require.Equal(t, seqboxtype.DeadLettered, seen.Outcome, "m stays as the other process settled it")
	})
}
