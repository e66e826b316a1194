package seqbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
)

// commitAndSettle is a batch from start to end: it runs ins in one
// transaction (runBatch: each input through the pipeline, then COMMIT),
// then settles each delivery of ds (nil for an input that came with
// none) at the transport (settle). keys are their scheduling keys. It
// returns the results and the messages stopped to be decided, which are
// not settled yet: they run again once decided.
func (c *Consumer) commitAndSettle(ctx context.Context, ds []transport.Delivery, ins []input, keys []string) ([][]seqboxtype.Result, []undecided, error) {
	if len(ins) == 0 {
		return nil, nil, nil
	}
	var ackedInTx bool
	out, us, err := c.runBatch(ctx, ins, c.ackInTx(ctx, ds, &ackedInTx))
	if err != nil {
		return c.batchFailed(ctx, ds, ins, keys, err)
	}
	for i := range us {
		if us[i].in.parkedRow() == nil {
			us[i].delivery, us[i].key = ds[us[i].origin], keys[us[i].origin]
		}
	}
	if err := c.settle(ctx, ds, ins, out, ackedInTx); err != nil {
		return nil, nil, err
	}
	return out, us, nil
}

// batchFailed answers a batch whose transaction failed with err: a crash
// or shutdown leaves its deliveries for redelivery; any other failure of
// a batch of several runs each delivery in a transaction of its own, so
// that one the store refuses does not hold the others hostage; else its
// deliveries are nacked.
func (c *Consumer) batchFailed(ctx context.Context, ds []transport.Delivery, ins []input, keys []string, err error) ([][]seqboxtype.Result, []undecided, error) {
	if fault.IsCrash(err) || ctx.Err() != nil {
		return nil, nil, err // a crash or shutdown: leave them for redelivery
	}
	if len(ins) > 1 && !errors.Is(err, errKeyConflict) {
		// One delivery may be what the store refuses: run each in a
		// transaction of its own, so the others are not held hostage.
		c.cfg.Logger.Error("seqbox: batch failed; retrying its deliveries one by one", "consumer", c.cfg.Name,
			"deliveries", len(ins), "err", err)
		var first error
		out := make([][]seqboxtype.Result, len(ins))
		var us []undecided
		for i := range ins {
			res, more, err := c.commitAndSettle(ctx, ds[i:i+1], ins[i:i+1], keys[i:i+1])
			if err != nil {
				if fault.IsCrash(err) || ctx.Err() != nil {
					return nil, nil, err
				}
				first = cmp.Or(first, err)
				continue
			}
			out[i] = res[0]
			for _, u := range more {
				u.origin = i
				us = append(us, u)
			}
		}
		return out, us, first
	}
	c.cfg.Logger.Error("seqbox: batch failed; nacking for redelivery", "consumer", c.cfg.Name, "deliveries", len(ins), "err", err)
	delay := time.Second
	if errors.Is(err, errKeyConflict) {
		delay = keyConflictDelay
	} else {
		// The store's failure: Run looks at it before it receives again.
		c.gate.suspect.Store(true)
	}
	for _, d := range ds {
		if d != nil {
			_ = d.Nack(context.WithoutCancel(ctx), delay)
		}
	}
	return nil, nil, err
}

// runBatch runs the inputs in one transaction and commits: optimistically
// (no savepoints) unless the consumer has Decide, and again with a
// savepoint each when the optimistic run must undo a delivery's writes
// (errRerun). It returns the results per input, in input order, and the
// messages it stopped to be decided (awaitDecision). beforeCommit, when
// set, runs last in the transaction with the results.
func (c *Consumer) runBatch(ctx context.Context, ins []input, beforeCommit func(transport.Execer, [][]seqboxtype.Result) error) ([][]seqboxtype.Result, []undecided, error) {
	c.p.parseAll(ins)
	failed := map[store.Identity]error{}
	// A consumer with Decide runs optimistically too when every message
	// a batch may stop to be decided can undo its writes in place
	// (pipeline.undoable); any other runs with savepoints from the start.
	optimistic := c.cfg.Decide == nil || c.p.undoable(ins)
	out, us, err := c.runBatchOnce(ctx, ins, beforeCommit, failed, optimistic)
	if errors.Is(err, errRerun) {
		out, us, err = c.runBatchOnce(ctx, ins, beforeCommit, failed, false)
	}
	return out, us, err
}

// runBatchOnce runs the batch in one transaction: optimistically (set-based,
// no savepoints; see batchTx), or delivery by delivery with a savepoint
// each.
func (c *Consumer) runBatchOnce(ctx context.Context, ins []input, beforeCommit func(transport.Execer, [][]seqboxtype.Result) error, failed map[store.Identity]error, optimistic bool) (_ [][]seqboxtype.Result, _ []undecided, err error) {
	start := time.Now()
	if err := c.hooks.At(fault.BeforeTx); err != nil {
		return nil, nil, err
	}
	tx, err := c.cfg.Store.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	// The batch's own cost, for the sizer: from BEGIN's return, so the
	// wait for SQLite's one writer (another batch's time) is left out.
	began := time.Now()
	btx := &batchTx{tx: tx, failed: failed, defers: c.cfg.BatchHandler != nil, lookAfterClaims: !c.p.serialWriters}
	if c.cfg.Decide != nil {
		if err := c.p.lockBusinessKeys(ctx, btx, ins); err != nil {
			tx.Rollback()
			return nil, nil, err
		}
	}
	var out [][]seqboxtype.Result
	defer func() { btx.endSpans(out, err) }()
	if optimistic {
		if err := c.p.prefetch(ctx, btx, ins, c.cfg.Now()); err != nil {
			tx.Rollback()
			return nil, nil, err
		}
		if !c.p.directTx.Load() {
			btx.queue = newQueuedTx(ctx, tx)
		}
	}
	out = make([][]seqboxtype.Result, len(ins))
	for i, in := range ins {
		if i > 0 && i == len(ins)/2 {
			if err := c.hooks.At(fault.MidBatch); err != nil {
				tx.Rollback()
				return nil, nil, err
			}
		}
		btx.origin = i
		n := len(btx.spans)
		results, err := c.p.deliver(ctx, btx, in)
		if err != nil {
			tx.Rollback()
			return nil, nil, err
		}
		if len(btx.spans) > n {
			ins[i].span = btx.spans[n].span.SpanContext()
		}
		out[i] = results
	}
	if err := c.p.applyDeferred(ctx, btx); err != nil {
		tx.Rollback()
		return nil, nil, err
	}
	if err := btx.finish(ctx); err != nil {
		tx.Rollback()
		return nil, nil, err
	}
	var last error
	if beforeCommit != nil {
		last = beforeCommit(btx.execer(), out)
	}
	if err := btx.sendQueue(ctx); err != nil {
		last = err // a queued statement failed: the cause of any other error
	}
	if last != nil {
		tx.Rollback()
		return nil, nil, last
	}
	if err := c.hooks.At(fault.BeforeCommit); err != nil {
		tx.Rollback()
		return nil, nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("commit: %w", err)
	}
	batchDone(c.cfg.Metrics, c.cfg.Name, len(ins), start)
	c.sizer.observe(len(ins), time.Since(began))
	if len(out) == 1 {
		c.observe(final(out[0]))
	} else {
		var all []seqboxtype.Result // one batch: its keys' spread is one observation each
		for _, results := range out {
			all = append(all, final(results)...)
		}
		c.observe(all)
	}
	return out, btx.undecided, nil
}

// inTx runs fn in one committed transaction of its own, for operator
// actions and the sweeper. point, when set, is the fault point just before
// the commit. The messages fn let out of the parked table that must be
// decided first are decided after the commit and run again (their key's
// unparking); their results follow fn's.
func (c *Consumer) inTx(ctx context.Context, point fault.Point, fn func(tx *batchTx) ([]seqboxtype.Result, error)) ([]seqboxtype.Result, error) {
	results, us, err := c.inTxOnce(ctx, point, fn)
	if err != nil || len(us) == 0 {
		return final(results), err
	}
	more, err := c.decideAndApply(ctx, us, nil)
	results = final(results)
	for _, m := range more {
		results = append(results, m...)
	}
	return results, err
}

// inTxOnce is inTx's transaction; it returns the messages fn stopped to be
// decided.
func (c *Consumer) inTxOnce(ctx context.Context, point fault.Point, fn func(tx *batchTx) ([]seqboxtype.Result, error)) ([]seqboxtype.Result, []undecided, error) {
	tx, err := c.cfg.Store.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	btx := &batchTx{tx: tx}
	results, err := fn(btx)
	if err == nil && point != "" {
		err = c.hooks.At(point)
	}
	if err != nil {
		tx.Rollback()
		btx.endSpans(nil, err)
		return nil, nil, err
	}
	if err := tx.Commit(); err != nil {
		err = fmt.Errorf("commit: %w", err)
		btx.endSpans(nil, err)
		return nil, nil, err
	}
	btx.endSpans([][]seqboxtype.Result{results}, nil)
	c.observe(final(results))
	return results, btx.undecided, nil
}
