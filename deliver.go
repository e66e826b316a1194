package seqbox

import (
	"context"
	"database/sql"
	"errors"

	"github.com/seqbox/seqbox/seqboxtype"
)

// Deliver runs one message through the whole pipeline in its own
// transaction and commits. It is what replay and HTTP ingest use: the
// caller acknowledges its own copy once Deliver returns without error
// (unless the first result is Retry). attempt is the broker's delivery
// count, 1 for a first delivery: it is the results' Attempt and the
// trace's seqbox.attempt, and a message delivered four times
// Retry.MaxAttempts and failing again is dead-lettered as a crash loop.
// The failed attempts Retry.MaxAttempts counts are the store's, recorded
// with the message: a first delivery passed as attempt 3 still has all
// of them.
func (c *Consumer) Deliver(ctx context.Context, raw []byte, attempt int) ([]seqboxtype.Result, error) {
	if err := c.register(ctx, false); err != nil {
		return nil, err
	}
	out, err := c.deliverAll(ctx, []input{{kind: received{}, raw: raw, attempt: max(attempt, 1)}})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// deliverAll runs the inputs in one transaction and, for a consumer with
// Decide, decides the messages it stopped and runs them again, until each
// input has its outcome.
func (c *Consumer) deliverAll(ctx context.Context, ins []input) ([][]seqboxtype.Result, error) {
	out, us, err := c.runBatch(ctx, ins, nil)
	if err != nil || len(us) == 0 {
		return out, err
	}
	for i := range us {
		if us[i].in.parkedRow() == nil {
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
// usable: roll it back. Observer and Metrics see the results at once,
// before the caller's commit. A consumer with Config.Decide cannot use
// it: the model call must stay outside any transaction.
func (c *Consumer) DeliverTx(ctx context.Context, tx *sql.Tx, raw []byte, attempt int) ([]seqboxtype.Result, error) {
	if c.cfg.Decide != nil {
		return nil, invalidConfig("Decide", "DeliverTx runs inside the caller's transaction; a consumer with Decide uses Deliver or Run, so the model call stays outside it")
	}
	if tx == nil {
		// Without one, each statement would commit on its own: the
		// identity recorded, the handler's writes not.
		return nil, errors.New("seqbox: DeliverTx: tx is nil: pass the transaction the delivery joins (or use Deliver)")
	}
	if err := c.registerWith(ctx, false, tx); err != nil {
		return nil, err
	}
	ins := []input{{kind: received{}, raw: raw, attempt: max(attempt, 1)}}
	btx := &batchTx{tx: c.cfg.Store.UnwrapTx(tx)}
	results, err := c.p.deliver(ctx, btx, ins[0])
	// The caller commits: the spans end with the results it is handed.
	btx.endSpans([][]seqboxtype.Result{results}, err)
	if err != nil {
		return nil, err
	}
	c.observe(results)
	return results, nil
}

// DeliverBatch runs several messages through the pipeline in one
// transaction (as Run's batches do: a savepoint each only when a failure
// makes it rerun), and commits once: the caller's own batch
// (an HTTP batch, a page of a backfill) at the cost of one fsync. It
// returns each message's results, in input order; the first result of
// each is its own. All are first deliveries.
func (c *Consumer) DeliverBatch(ctx context.Context, raws [][]byte) ([][]seqboxtype.Result, error) {
	if err := c.register(ctx, false); err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, nil
	}
	ins := make([]input, len(raws))
	for i, raw := range raws {
		ins[i] = input{kind: received{}, raw: raw, attempt: 1}
	}
	return c.deliverAll(ctx, ins)
}

// Oversized is an input too large to hold whole, such as a line of a file
// far over seqboxtype.MaxEventSize: its first bytes, its full size, and
// the SHA-256 of all of it.
type Oversized struct {
	// Prefix is the input's first bytes: the dead letter keeps them as
	// its envelope.
	Prefix []byte
	// Size is the whole input's length in bytes, named in the reason.
	Size int64
	// SHA256 is the SHA-256 of the whole input: the rejected identity is
	// "sha256:" and its hex, and the row's payload hash its hex.
	SHA256 [32]byte
}

// DeliverOversized records an input too large to hand over whole as
// rejected, with its size in the reason, under the identity of its hash:
// delivered again, it is rejected again without a second dead letter. The
// DLQ keeps its Prefix. A reader of a stream (replay's file of lines) uses
// it so that one huge input is one outcome, in bounded memory, and never
// the end of the stream.
func (c *Consumer) DeliverOversized(ctx context.Context, o Oversized) ([]seqboxtype.Result, error) {
	if err := c.register(ctx, false); err != nil {
		return nil, err
	}
	out, _, err := c.runBatch(ctx, []input{{kind: tooLarge{&o}, raw: o.Prefix, attempt: 1}}, nil)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}
