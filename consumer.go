package seqbox

import (
	"context"
	"database/sql"
	"time"

	"github.com/seqbox/seqbox/internal/engine"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/handlerkind"
	"github.com/seqbox/seqbox/store"
)

// Consumer applies one consumer's messages: inbox, ordering gate, handler
// and drain in one transaction per batch (DESIGN §3). Build it with
// NewConsumer; its engine lives in internal/engine.
type Consumer struct {
	e *engine.Consumer
}

func init() {
	// The chaos harness and seqbox's commands reach the engine through
	// these, never through the public API.
	fault.Install = func(c any, hook fault.Hook) { c.(*Consumer).e.SetHooks(hook) }
	handlerkind.Set = func(c any, kind string) { c.(*Consumer).e.SetKind(kind) }
}

// NewConsumer validates cfg, fills in defaults and returns a consumer.
func NewConsumer(cfg Config) (*Consumer, error) {
	e, err := engine.NewConsumer(cfg)
	if err != nil {
		return nil, err
	}
	return &Consumer{e: e}, nil
}

// Name is the consumer's name.
func (c *Consumer) Name() string { return c.e.Name() }

// Store is the consumer's store.
func (c *Consumer) Store() store.Store { return c.e.Store() }

// Deliver runs one message through the whole pipeline in its own
// transaction and commits. It is what replay and HTTP ingest use: the
// caller acknowledges its own copy once Deliver returns without error
// (unless the first decision is Retry). attempt is 1 for a first delivery.
func (c *Consumer) Deliver(ctx context.Context, raw []byte, attempt int) ([]Result, error) {
	return c.e.Deliver(ctx, raw, attempt)
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
	return c.e.DeliverTx(ctx, tx, raw, attempt)
}

// DeliverBatch runs several messages through the pipeline in one
// transaction, a savepoint each, and commits once: the caller's own batch
// (an HTTP batch, a page of a backfill) at the cost of one fsync. It
// returns each message's decisions, in input order; the first decision of
// each is its own. All are first deliveries.
func (c *Consumer) DeliverBatch(ctx context.Context, raws [][]byte) ([][]Result, error) {
	return c.e.DeliverBatch(ctx, raws)
}

// DeliverOversized records an input larger than MaxEventSize as rejected,
// with its size in the reason, under the identity of its hash (delivered
// again, it is rejected again without a second DLQ row). The DLQ keeps its
// prefix. Replay uses it so that one huge line is one outcome, in bounded
// memory, and never the end of a run.
func (c *Consumer) DeliverOversized(ctx context.Context, o Oversized) ([]Result, error) {
	return c.e.DeliverOversized(ctx, o)
}

// Redrive sends DLQ message seq back through the pipeline under its
// original identity. Anything already applied is recognised by the inbox;
// if the message blocked its key, the key is released and its parked
// successors are applied after it, in version order, in the same
// transaction.
func (c *Consumer) Redrive(ctx context.Context, seq int64) ([]Result, error) {
	return c.e.Redrive(ctx, seq)
}

// Skip resolves DLQ message seq without applying it: the decision (who and
// why) is recorded as a known gap, the key is released, and the parked
// successors are applied in version order.
func (c *Consumer) Skip(ctx context.Context, seq int64, who, why string) ([]Result, error) {
	return c.e.Skip(ctx, seq, who, why)
}

// ReleaseKey unblocks a key blocked by a gap (hold timeout with
// HoldExpiry=block): the missing versions are recorded as a known gap
// decided by who, and the parked messages apply in version order.
func (c *Consumer) ReleaseKey(ctx context.Context, key, who, why string) ([]Result, error) {
	return c.e.ReleaseKey(ctx, key, who, why)
}

// Sweep ends holds that reached HoldTimeout (HoldExpiry decides) and
// releases keys blocked longer than MaxBlock, with an alert. Run calls it
// every second; call it yourself when driving Deliver directly.
func (c *Consumer) Sweep(ctx context.Context) ([]Result, error) { return c.e.Sweep(ctx) }

// RunRequests executes the pending operator requests addressed to this
// consumer (DESIGN §4): a redrive, skip or release that the CLI or the
// admin API recorded runs here, through this consumer's own pipeline and
// handler, and its decisions are recorded on the request. Run calls it
// continuously; a consumer driven by Deliver calls it itself. It returns
// how many requests it executed. A request another process took first is
// left to it.
func (c *Consumer) RunRequests(ctx context.Context) (int, error) { return c.e.RunRequests(ctx) }

// Purge removes inbox identities whose retention ended, batch at a time
// (each batch its own short transaction), until none are left or ctx ends.
// Held and blocked identities are never purged. It returns how many it
// removed. Config.Retention was validated to cover the broker's
// redelivery window and the DLQ's redrive window, so a purged identity can
// no longer come back.
func (c *Consumer) Purge(ctx context.Context, batch int) (int64, error) { return c.e.Purge(ctx, batch) }

// Run receives from the transport and applies until ctx is cancelled. Keys
// run in parallel on Config.Workers workers; a key is pinned to one worker
// while it has deliveries in flight, so its deliveries apply strictly in
// sequence, and a busy key goes to the back of the line after each batch so
// a hot key cannot starve the others. On cancellation, batches in flight
// either commit and ack or roll back and are left for redelivery; queued
// deliveries are nacked for prompt redelivery. Run returns nil after a
// clean shutdown.
//
// Run registers the consumer first; it returns an error matching
// ErrPolicyConflict, and receives nothing, when a live consumer of the same
// name (its heartbeat within LiveWithin) is registered with different
// policies. Competing consumers of one name must share their policies.
func (c *Consumer) Run(ctx context.Context) error {
	if err := c.e.CheckPolicies(ctx); err != nil {
		return err
	}
	return c.e.Run(ctx)
}

// RunUntilIdle is Run that also returns, with nil, once the transport has
// had nothing to deliver for idle and nothing received is still being
// applied: a test, a backfill or a one-off replay of a queue ends when the
// queue is drained. A message nacked for a later retry is invisible at the
// transport until its backoff passes, so choose idle longer than the
// retry backoff when those retries must finish too. Messages parked by the
// gate (held, blocked) are in the database, not the queue, and do not keep
// it running.
//
// Like Run, it refuses to start beside a live consumer of the same name
// with different policies (ErrPolicyConflict).
func (c *Consumer) RunUntilIdle(ctx context.Context, idle time.Duration) error {
	if idle > 0 {
		if err := c.e.CheckPolicies(ctx); err != nil {
			return err
		}
	}
	return c.e.RunUntilIdle(ctx, idle)
}

// RefreshMetrics sets the gauges (held messages, blocked keys, age of the
// oldest stuck message, DLQ size, inbox rows, gaps) from the store. Run
// calls it every 15 seconds.
func (c *Consumer) RefreshMetrics(ctx context.Context) error { return c.e.RefreshMetrics(ctx) }
