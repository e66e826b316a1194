package seqbox

import (
	"context"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/store"
)

// DefaultPurgeBatch is how many identities one purge statement removes, so
// that retention never holds the write lock long enough to stall live
// traffic.
const DefaultPurgeBatch = 500

// purgePause is the gap between purge batches.
const purgePause = 10 * time.Millisecond

// Purge removes inbox identities whose retention ended, batch at a time
// (each batch its own short transaction; batch <= 0 is DefaultPurgeBatch),
// until none are left or ctx ends, with what seqbox keeps about each in
// other tables (store.Executor.InboxPurge). Held and blocked identities
// are never purged. It returns how many it removed. Config.Retention was validated
// to cover the broker's redelivery window and the DLQ's redrive window, so
// a purged identity can no longer come back. Run purges every hour and
// Maintain once; a program that schedules retention itself (the gateway's
// --purge-every, the CLI's purge) calls Purge.
func (c *Consumer) Purge(ctx context.Context, batch int) (int64, error) {
	if batch <= 0 {
		batch = DefaultPurgeBatch
	}
	var total int64
	var from time.Time
	defer func() {
		if total > 0 {
			c.cfg.Logger.Info("seqbox: retention purge removed expired identities", "consumer", c.cfg.Name,
				"removed", total, "retention", c.cfg.Retention.String())
		}
	}()
	for ctx.Err() == nil {
		if err := c.hooks.At(fault.DuringPurge); err != nil {
			return total, err
		}
		// Each batch starts where the last one ended (InboxPurgeParams.From).
		// An identity that was held when the purge passed its retention
		// end waits for the next purge.
		r, err := c.cfg.Store.Executor().InboxPurge(ctx, store.InboxPurgeParams{Consumer: c.cfg.Name, Now: c.cfg.Now(), Limit: batch, From: from})
		if err != nil {
			return total, err
		}
		n := r.Removed
		if n > 0 {
			from = r.Last
		}
		total += n
		if c.cfg.Metrics != nil {
			c.cfg.Metrics.PurgedRows.WithLabelValues(c.cfg.Name).Add(float64(n))
		}
		if n < int64(batch) {
			return total, nil
		}
		// Let live transactions take the write lock between batches: a
		// writer waiting on SQLite's busy handler polls at 1-100 ms and
		// would keep missing a shorter gap.
		sleep(ctx, purgePause)
	}
	return total, ctx.Err()
}
