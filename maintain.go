package seqbox

import (
	"context"
	"errors"
	"time"
)

// The upkeep Run does in the background, and Maintain does once.
const (
	// sweepEvery is how often Run ends holds that reached HoldTimeout and
	// keys blocked past MaxBlock.
	sweepEvery = time.Second
	// gaugesEvery is how often Run refreshes the gauges from the store,
	// at most (gaugesWait).
	gaugesEvery = 15 * time.Second
	// purgeEvery is how often Run removes identities whose retention ended.
	// The first purge comes one period after Run starts.
	purgeEvery = time.Hour
)

// Maintain does once the upkeep Run does in the background: it ends holds
// that reached HoldTimeout (HoldExpiry decides) and keys blocked longer than
// MaxBlock, runs the operator requests addressed to this consumer (redrive,
// skip and release recorded by the CLI or the admin API), refreshes the
// gauges when Config.Metrics is set, and removes inbox identities whose
// Retention ended, a bounded batch at a time.
//
// A consumer driven by Deliver, DeliverBatch or DeliverTx instead of Run
// calls Maintain every second or so; a consumer that calls Run needs
// nothing more. Each step runs even when an earlier one failed; the error
// joins their failures. The steps are Sweep, RunRequests, RefreshMetrics
// and Purge, each callable alone.
func (c *Consumer) Maintain(ctx context.Context) error {
	_, sweepErr := c.Sweep(ctx)
	_, requestsErr := c.RunRequests(ctx)
	gaugesErr := c.RefreshMetrics(ctx)
	_, purgeErr := c.Purge(ctx, DefaultPurgeBatch)
	return errors.Join(sweepErr, requestsErr, gaugesErr, purgeErr)
}

// maintainLoop is Run's upkeep: sweep every second, gauges every 15
// seconds (or less often, gaugesWait), retention every hour. Failures are
// logged; the next tick tries again.
func (c *Consumer) maintainLoop(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	started := time.Now()
	var refreshed time.Time
	wait := gaugesEvery
	purged := started
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := c.Sweep(ctx); err != nil && ctx.Err() == nil {
				c.cfg.Logger.Warn("seqbox: sweep failed", "consumer", c.cfg.Name, "err", err)
			}
			if c.cfg.Metrics != nil && time.Since(refreshed) >= wait {
				refreshed = time.Now()
				if err := c.RefreshMetrics(ctx); err != nil && ctx.Err() == nil {
					c.cfg.Logger.Warn("seqbox: metrics refresh failed", "consumer", c.cfg.Name, "err", err)
				}
				wait = gaugesWait(time.Since(refreshed))
			}
			if time.Since(purged) >= purgeEvery {
				purged = time.Now()
				if _, err := c.Purge(ctx, DefaultPurgeBatch); err != nil && ctx.Err() == nil {
					c.cfg.Logger.Warn("seqbox: retention purge failed", "consumer", c.cfg.Name, "err", err)
				}
			}
		}
	}
}

// gaugesWait is how long Run waits before it refreshes the gauges again,
// after a refresh that took took: gaugesEvery, or a hundred times took if
// that is longer. Counting the inbox reads each of its rows, and with a
// retention's worth of identities (30 days at 100 events/s is 260 million)
// one count takes a minute; it runs in the loop that sweeps every second,
// so the sweep is late by as much. Refreshed no more often than this, the
// count costs at most a hundredth of the loop's time.
func gaugesWait(took time.Duration) time.Duration { return max(gaugesEvery, 100*took) }
