package seqbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/handoff"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
)

// Consumer applies events from a transport through the inbox pipeline:
// receive, one transaction per batch (a savepoint per delivery), COMMIT,
// then ACK.
type Consumer struct {
	cfg Config
	p   *pipeline
	// kind is the registered handler kind (store.HandlerApplication unless
	// seqbox's own commands mark it record).
	kind string
	// process names this process in the registration and in the operator
	// requests it takes.
	process string
	// claimant names this consumer in the claims of decisions in flight.
	claimant string
	// decider runs Config.Decide for the messages the pipeline stops to
	// be decided.
	decider    *decider
	regMu      sync.Mutex
	registered atomic.Bool
	// txAck is the transport when it acknowledges in the store's own
	// transaction (the embedded queue in the store's file).
	txAck transport.TxAcker
	// hooks: see pipeline.hooks.
	hooks fault.Hook
}

// NewConsumer validates cfg, fills in defaults and returns a consumer.
func NewConsumer(cfg Config) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.WithDefaults()
	cons := &Consumer{cfg: c, p: &pipeline{cfg: c}, kind: store.HandlerApplication, process: processName()}
	cons.claimant = cons.process + "/" + randomSuffix()
	cons.decider = newDecider(cons)
	if ta, ok := c.Transport.(transport.TxAcker); ok {
		if st, ok := c.Store.(interface{ Location() string }); ok && ta.Location() != "" && ta.Location() == st.Location() {
			cons.txAck = ta
		}
	}
	return cons, nil
}

// Name is the consumer's name.
func (c *Consumer) Name() string { return c.cfg.Name }

// Deliver runs one message through the whole pipeline in its own
// transaction and commits. It is what replay and HTTP ingest use: the
// caller acknowledges its own copy once Deliver returns without error
// (unless the first decision is Retry). attempt is 1 for a first delivery.
func (c *Consumer) Deliver(ctx context.Context, raw []byte, attempt int) ([]Result, error) {
	if err := c.register(ctx, false); err != nil {
		return nil, err
	}
	out, err := c.deliverAll(ctx, []input{{raw: raw, attempt: max(attempt, 1)}})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// deliverAll runs the inputs in one transaction and, for a consumer with
// Decide, decides the messages it stopped and runs them again, until each
// input has its outcome.
func (c *Consumer) deliverAll(ctx context.Context, ins []input) ([][]Result, error) {
	out, us, err := c.runBatch(ctx, ins, nil)
	if err != nil || len(us) == 0 {
		return out, err
	}
	for i := range us {
		if us[i].in.parked == nil {
			us[i].key = "u:" + us[i].ev.Source + "\x00" + us[i].ev.ID
			if us[i].ev.PartitionKey != "" {
				us[i].key = "k:" + us[i].ev.PartitionKey
			}
		}
	}
	more, err := c.decideAndApply(ctx, us, nil)
	for i := range out {
		if m, ok := more[i]; ok || len(out[i]) != len(final(out[i])) {
			out[i] = append(final(out[i]), m...)
		}
	}
	return out, err
}

// DeliverTx runs one message through the pipeline inside the caller's
// transaction, opened on Store().DB(), like river's InsertTx: a webhook
// handler that already holds a transaction records the identity, the gate
// and the effect in it. Nothing is committed here: the caller commits (and
// then acknowledges its own copy) or rolls back, and a rollback forgets
// the delivery entirely. An error means the transaction is no longer
// usable: roll it back. Observer and Metrics see the decisions at once,
// before the caller's commit. A consumer with Config.Decide cannot use
// it: the model call must stay outside any transaction.
func (c *Consumer) DeliverTx(ctx context.Context, tx *sql.Tx, raw []byte, attempt int) ([]Result, error) {
	if c.cfg.Decide != nil {
		return nil, invalidConfig("Decide", "DeliverTx runs inside the caller's transaction; a consumer with Decide uses Deliver or Run, so the model call stays outside it")
	}
	if err := c.registerWith(ctx, false, tx); err != nil {
		return nil, err
	}
	ins := []input{{raw: raw, attempt: max(attempt, 1)}}
	ds, err := c.p.deliver(ctx, &batchTx{ExecutorTx: c.cfg.Store.UnwrapTx(tx)}, ins[0])
	if err != nil {
		return nil, err
	}
	c.observe(ds)
	return ds, nil
}

// DeliverBatch runs several messages through the pipeline in one
// transaction, a savepoint each, and commits once: the caller's own batch
// (an HTTP batch, a page of a backfill) at the cost of one fsync. It
// returns each message's decisions, in input order; the first decision of
// each is its own. All are first deliveries.
func (c *Consumer) DeliverBatch(ctx context.Context, raws [][]byte) ([][]Result, error) {
	if err := c.register(ctx, false); err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, nil
	}
	ins := make([]input, len(raws))
	for i, raw := range raws {
		ins[i] = input{raw: raw, attempt: 1}
	}
	return c.deliverAll(ctx, ins)
}

// deliverOversized records an input larger than MaxEventSize as rejected,
// with its size in the reason, under the identity of its hash (delivered
// again, it is rejected again without a second DLQ row). The DLQ keeps its
// prefix. Replay uses it so that one huge line is one outcome, in bounded
// memory, and never the end of a run.
func (c *Consumer) deliverOversized(ctx context.Context, o handoff.Oversized) ([]Result, error) {
	if err := c.register(ctx, false); err != nil {
		return nil, err
	}
	out, _, err := c.runBatch(ctx, []input{{raw: o.Prefix, attempt: 1, oversized: &o}}, nil)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// runBatch runs the inputs in one transaction, a savepoint each, and
// commits. It returns the results per input, in input order, and the
// messages it stopped to be decided (awaitDecision). beforeCommit, when
// set, runs last in the transaction with the results.
func (c *Consumer) runBatch(ctx context.Context, ins []input, beforeCommit func(store.ExecutorTx, [][]Result) error) ([][]Result, []undecided, error) {
	c.p.parseAll(ins)
	failed := map[store.Identity]error{}
	// A consumer with Decide runs with savepoints from the start: a
	// message stopped to be decided rolls its own writes back.
	optimistic := c.cfg.Decide == nil
	out, us, err := c.runBatchOnce(ctx, ins, beforeCommit, failed, optimistic)
	if errors.Is(err, errRerun) {
		out, us, err = c.runBatchOnce(ctx, ins, beforeCommit, failed, false)
	}
	return out, us, err
}

// runBatchOnce runs the batch in one transaction: optimistically (set-based,
// no savepoints; see batchTx), or delivery by delivery with a savepoint
// each.
func (c *Consumer) runBatchOnce(ctx context.Context, ins []input, beforeCommit func(store.ExecutorTx, [][]Result) error, failed map[store.Identity]error, optimistic bool) ([][]Result, []undecided, error) {
	start := time.Now()
	if err := c.hooks.At(fault.BeforeTx); err != nil {
		return nil, nil, err
	}
	tx, err := c.cfg.Store.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	btx := &batchTx{ExecutorTx: tx, failed: failed, defers: c.cfg.BatchHandler != nil}
	if optimistic {
		if err := c.p.prefetch(ctx, btx, ins, c.cfg.Now()); err != nil {
			tx.Rollback()
			return nil, nil, err
		}
	}
	out := make([][]Result, len(ins))
	for i, in := range ins {
		if i > 0 && i == len(ins)/2 {
			if err := c.hooks.At(fault.MidBatch); err != nil {
				tx.Rollback()
				return nil, nil, err
			}
		}
		btx.origin = i
		ds, err := c.p.deliver(ctx, btx, in)
		if err != nil {
			tx.Rollback()
			return nil, nil, err
		}
		out[i] = ds
	}
	if err := c.p.applyDeferred(ctx, btx); err != nil {
		tx.Rollback()
		return nil, nil, err
	}
	if err := btx.finish(ctx); err != nil {
		tx.Rollback()
		return nil, nil, err
	}
	if beforeCommit != nil {
		if err := beforeCommit(tx, out); err != nil {
			tx.Rollback()
			return nil, nil, err
		}
	}
	if err := c.hooks.At(fault.BeforeCommit); err != nil {
		tx.Rollback()
		return nil, nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("commit: %w", err)
	}
	batchDone(c.cfg.Metrics, c.cfg.Name, len(ins), start)
	for _, ds := range out {
		c.observe(final(ds))
	}
	return out, btx.undecided, nil
}

// inTx runs fn in one committed transaction of its own, for operator
// actions and the sweeper. point, when set, is the fault point just before
// the commit. The messages fn let out of the parked table that must be
// decided first are decided after the commit and run again (their key's
// unparking); their results follow fn's.
func (c *Consumer) inTx(ctx context.Context, point fault.Point, fn func(tx *batchTx) ([]Result, error)) ([]Result, error) {
	ds, us, err := c.inTxOnce(ctx, point, fn)
	if err != nil || len(us) == 0 {
		return final(ds), err
	}
	more, err := c.decideAndApply(ctx, us, nil)
	ds = final(ds)
	for _, m := range more {
		ds = append(ds, m...)
	}
	return ds, err
}

// inTxOnce is inTx's transaction; it returns the messages fn stopped to be
// decided.
func (c *Consumer) inTxOnce(ctx context.Context, point fault.Point, fn func(tx *batchTx) ([]Result, error)) ([]Result, []undecided, error) {
	tx, err := c.cfg.Store.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	btx := &batchTx{ExecutorTx: tx}
	ds, err := fn(btx)
	if err == nil && point != "" {
		err = c.hooks.At(point)
	}
	if err != nil {
		tx.Rollback()
		return nil, nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("commit: %w", err)
	}
	c.observe(final(ds))
	return ds, btx.undecided, nil
}

// observe counts results and tells the Observer, after their commit.
func (c *Consumer) observe(ds []Result) {
	observe(c.cfg.Metrics, c.cfg.Name, ds)
	if c.cfg.Observer != nil {
		for _, d := range ds {
			c.cfg.Observer(d)
		}
	}
}
