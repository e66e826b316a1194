package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
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
	claimant   string
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
	if ta, ok := c.Transport.(transport.TxAcker); ok {
		if st, ok := c.Store.(interface{ Location() string }); ok && ta.Location() != "" && ta.Location() == st.Location() {
			cons.txAck = ta
		}
	}
	return cons, nil
}

// Name is seqbox.Consumer.Name.
func (c *Consumer) Name() string { return c.cfg.Name }

// Store is seqbox.Consumer.Store.
func (c *Consumer) Store() store.Store { return c.cfg.Store }

// Deliver is seqbox.Consumer.Deliver.
func (c *Consumer) Deliver(ctx context.Context, raw []byte, attempt int) ([]Result, error) {
	if err := c.register(ctx, false); err != nil {
		return nil, err
	}
	ins := []input{{raw: raw, attempt: max(attempt, 1)}}
	c.decideAll(ctx, ins)
	out, err := c.runBatch(ctx, ins, nil)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// DeliverTx is seqbox.Consumer.DeliverTx.
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
	observe(c.cfg.Metrics, c.cfg.Name, ds)
	if c.cfg.Observer != nil {
		for _, d := range ds {
			c.cfg.Observer(d)
		}
	}
	return ds, nil
}

// DeliverBatch is seqbox.Consumer.DeliverBatch.
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
	c.decideAll(ctx, ins)
	return c.runBatch(ctx, ins, nil)
}

// DeliverOversized is seqbox.Consumer.DeliverOversized.
func (c *Consumer) DeliverOversized(ctx context.Context, o Oversized) ([]Result, error) {
	if err := c.register(ctx, false); err != nil {
		return nil, err
	}
	out, err := c.runBatch(ctx, []input{{raw: o.Prefix, attempt: 1, oversized: &o}}, nil)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// runBatch runs the inputs in one transaction, a savepoint each, and
// commits. It returns the decisions per input, in input order.
// beforeCommit, when set, runs last in the transaction with the decisions.
func (c *Consumer) runBatch(ctx context.Context, ins []input, beforeCommit func(store.ExecutorTx, [][]Result) error) ([][]Result, error) {
	c.p.parseAll(ins)
	failed := map[store.Identity]error{}
	out, err := c.runBatchOnce(ctx, ins, beforeCommit, failed, true)
	if errors.Is(err, errRerun) {
		out, err = c.runBatchOnce(ctx, ins, beforeCommit, failed, false)
	}
	return out, err
}

// runBatchOnce runs the batch in one transaction: optimistically (set-based,
// no savepoints; see batchTx), or delivery by delivery with a savepoint
// each.
func (c *Consumer) runBatchOnce(ctx context.Context, ins []input, beforeCommit func(store.ExecutorTx, [][]Result) error, failed map[store.Identity]error, optimistic bool) ([][]Result, error) {
	start := time.Now()
	if err := c.hooks.At(fault.BeforeTx); err != nil {
		return nil, err
	}
	tx, err := c.cfg.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	btx := &batchTx{ExecutorTx: tx, failed: failed, defers: c.cfg.BatchHandler != nil}
	if optimistic {
		if err := c.p.prefetch(ctx, btx, ins, c.cfg.Now()); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	out := make([][]Result, len(ins))
	for i, in := range ins {
		if i > 0 && i == len(ins)/2 {
			if err := c.hooks.At(fault.MidBatch); err != nil {
				tx.Rollback()
				return nil, err
			}
		}
		ds, err := c.p.deliver(ctx, btx, in)
		if err != nil {
			tx.Rollback()
			return nil, err
		}
		out[i] = ds
	}
	if err := c.p.applyDeferred(ctx, btx); err != nil {
		tx.Rollback()
		return nil, err
	}
	if err := btx.finish(ctx); err != nil {
		tx.Rollback()
		return nil, err
	}
	if beforeCommit != nil {
		if err := beforeCommit(tx, out); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	if err := c.hooks.At(fault.BeforeCommit); err != nil {
		tx.Rollback()
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	batchDone(c.cfg.Metrics, c.cfg.Name, len(ins), start)
	for _, ds := range out {
		observe(c.cfg.Metrics, c.cfg.Name, ds)
		if c.cfg.Observer != nil {
			for _, d := range ds {
				c.cfg.Observer(d)
			}
		}
	}
	return out, nil
}

// inTx runs fn in one committed transaction of its own, for operator
// actions and the sweeper. point, when set, is the fault point just before
// the commit.
func (c *Consumer) inTx(ctx context.Context, point fault.Point, fn func(tx *batchTx) ([]Result, error)) ([]Result, error) {
	tx, err := c.cfg.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	ds, err := fn(&batchTx{ExecutorTx: tx})
	if err == nil && point != "" {
		err = c.hooks.At(point)
	}
	if err != nil {
		tx.Rollback()
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	observe(c.cfg.Metrics, c.cfg.Name, ds)
	if c.cfg.Observer != nil {
		for _, d := range ds {
			c.cfg.Observer(d)
		}
	}
	return ds, nil
}
