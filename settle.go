package seqbox

import (
	"cmp"
	"context"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
	"go.opentelemetry.io/otel/trace"
)

// keyConflictDelay is how soon a delivery that lost a key race comes back.
const keyConflictDelay = 50 * time.Millisecond

// ackInTx is the batch's last step when the queue is in the store's
// database (TxAcker): it acknowledges, in the batch's own transaction, the
// deliveries that reached an outcome, so nothing is left between COMMIT
// and ACK, and sets *acked. Nil for any other transport.
func (c *Consumer) ackInTx(ctx context.Context, ds []transport.Delivery, acked *bool) func(transport.Execer, [][]seqboxtype.Result) error {
	if c.txAck == nil {
		return nil
	}
	return func(tx transport.Execer, out [][]seqboxtype.Result) error {
		acks := ackable(ds, out)
		if len(acks) == 0 {
			return nil
		}
		*acked = true
		return c.txAck.AckIn(ctx, tx, acks)
	}
}

// ackable is the deliveries of ds (nil for an input that came with none)
// whose results out are outcomes: acknowledged once committed. A retry is
// nacked, and a message stopped to be decided is left unsettled.
func ackable(ds []transport.Delivery, out [][]seqboxtype.Result) []transport.Delivery {
	var acks []transport.Delivery
	for i, d := range ds {
		if d != nil && out[i][0].Outcome != seqboxtype.Retry && out[i][0].Outcome != outcomeDeciding {
			acks = append(acks, d)
		}
	}
	return acks
}

// settle tells the transport the end of each committed delivery of ds
// (nil for an input that came with none): ack for an outcome, nack with
// its backoff for a retry; a message stopped to be decided is left
// unsettled (it runs again once decided). ackedInTx: the acks went in the
// batch's transaction (ackInTx). Its error is a crash injected after the
// commit; a failed ack or nack is only logged.
func (c *Consumer) settle(ctx context.Context, ds []transport.Delivery, ins []input, out [][]seqboxtype.Result, ackedInTx bool) error {
	if ac, ok := c.txAck.(transport.TxAckCommitter); ok && ackedInTx {
		ac.AckCommitted(ackable(ds, out))
	}
	if err := c.hooks.At(fault.AfterCommit); err != nil {
		return err
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
	return nil
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
