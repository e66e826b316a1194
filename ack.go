package seqbox

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
	"go.opentelemetry.io/otel/trace"
)

// keyConflictDelay is how soon a delivery that lost a key race comes back.
const keyConflictDelay = 50 * time.Millisecond

// commitAndSettle runs ins in one transaction, then acks or nacks each
// delivery of ds (nil for an input that came with none); keys are their
// scheduling keys. It returns the results and the messages stopped to be
// decided, which are not settled yet: they run again once decided.
func (c *Consumer) commitAndSettle(ctx context.Context, ds []transport.Delivery, ins []input, keys []string) ([][]seqboxtype.Result, []undecided, error) {
	if len(ins) == 0 {
		return nil, nil, nil
	}
	var ackedInTx bool
	var beforeCommit func(transport.Execer, [][]seqboxtype.Result) error
	if c.txAck != nil {
		// The queue is in the store's database: acknowledge in the batch's
		// own transaction, so nothing is left between COMMIT and ACK.
		beforeCommit = func(tx transport.Execer, out [][]seqboxtype.Result) error {
			var acks []transport.Delivery
			for i, d := range ds {
				if d != nil && out[i][0].Outcome != seqboxtype.Retry && out[i][0].Outcome != outcomeDeciding {
					acks = append(acks, d)
				}
			}
			if len(acks) == 0 {
				return nil
			}
			ackedInTx = true
			return c.txAck.AckIn(ctx, tx, acks)
		}
	}
	out, us, err := c.runBatch(ctx, ins, beforeCommit)
	if err != nil {
		if fault.IsCrash(err) || ctx.Err() != nil {
			return nil, nil, err // a crash or shutdown: leave them for redelivery
		}
		if len(ins) > 1 && !errors.Is(err, errKeyConflict) {
			// One delivery may be what the store refuses: run each in a
			// transaction of its own, so the others are not held hostage.
			c.cfg.Logger.Error("seqbox: batch failed; retrying its deliveries one by one", "consumer", c.cfg.Name,
				"deliveries", len(ins), "err", err)
			var first error
			out = make([][]seqboxtype.Result, len(ins))
			us = nil
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
		}
		for _, d := range ds {
			if d != nil {
				_ = d.Nack(context.WithoutCancel(ctx), delay)
			}
		}
		return nil, nil, err
	}
	for i := range us {
		if us[i].in.parked == nil {
			us[i].delivery, us[i].key = ds[us[i].origin], keys[us[i].origin]
		}
	}
	if ac, ok := c.txAck.(transport.TxAckCommitter); ok && ackedInTx {
		ac.AckCommitted()
	}
	if err := c.hooks.At(fault.AfterCommit); err != nil {
		return nil, nil, err
	}
	settle := context.WithoutCancel(ctx)
	var acks []transport.Delivery
	var acked []trace.SpanContext
	for i, d := range ds {
		if d == nil {
			continue
		}
		first := out[i][0]
		var err error
		start := time.Now()
		switch {
		case first.Outcome == outcomeDeciding:
			continue // it runs again once decided
		case first.Outcome != seqboxtype.Retry:
			acks = append(acks, d)
			acked = append(acked, ins[i].span)
			continue
		case first.KeyConflict:
			err = d.Nack(settle, keyConflictDelay)
		case first.RetryAfter > 0:
			err = d.Nack(settle, first.RetryAfter)
		default:
			err = d.Nack(settle, c.cfg.Retry.Backoff(first.Attempt))
		}
		c.tr.settle(ins[i].span, "nack", start, time.Now(), err)
		if err != nil {
			c.cfg.Logger.Warn("seqbox: settle failed after commit; the inbox absorbs the redelivery",
				"consumer", c.cfg.Name, "source", first.Source, "id", first.ID, "err", err)
		}
	}
	start, err := time.Now(), error(nil)
	if !ackedInTx {
		err = c.ack(settle, acks)
	}
	end := time.Now()
	for _, sc := range acked {
		c.tr.settle(sc, "ack", start, end, err)
	}
	return out, us, nil
}

// ack settles committed deliveries, in one round trip when the transport
// can, and returns the first failure. A lost lease is only logged: the
// inbox absorbs the redelivery.
func (c *Consumer) ack(ctx context.Context, ds []transport.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	if b, ok := c.cfg.Transport.(transport.BatchAcker); ok {
		err := b.AckBatch(ctx, ds)
		if err != nil {
			c.cfg.Logger.Warn("seqbox: ack failed after commit; the inbox absorbs the redelivery",
				"consumer", c.cfg.Name, "err", err)
		}
		return err
	}
	var first error
	for _, d := range ds {
		if err := d.Ack(ctx); err != nil {
			first = cmp.Or(first, err)
			c.cfg.Logger.Warn("seqbox: ack failed after commit; the inbox absorbs the redelivery",
				"consumer", c.cfg.Name, "err", err)
		}
	}
	return first
}
