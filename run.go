package seqbox

import (
	"context"
	"time"
)

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
	if err := c.checkRegistration(ctx); err != nil {
		return err
	}
	return c.run(ctx, 0)
}

// RunUntilIdle is Run that also returns, with nil, once the transport has
// had nothing to deliver for idle and nothing received is still being
// applied: a test, a backfill or a one-off replay of a queue ends when the
// transport is idle. A message nacked for a later retry is invisible at the
// transport until its backoff passes, so choose idle longer than the
// retry backoff when those retries must finish too. Messages parked by the
// gate (held, blocked) are in the database, not the queue, and do not keep
// it running.
//
// Like Run, it refuses to start beside a live consumer of the same name
// with different policies (ErrPolicyConflict).
func (c *Consumer) RunUntilIdle(ctx context.Context, idle time.Duration) error {
	if idle <= 0 {
		return invalidConfig("idle", "%s: must be positive", idle)
	}
	if err := c.checkRegistration(ctx); err != nil {
		return err
	}
	return c.run(ctx, idle)
}
