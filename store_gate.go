package seqbox

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/internal/sqlstore"
)

// storeGate holds Run's receiving while the store may be unreachable
// (docs/design.md §8, "A store that does not answer"). A batch whose
// transaction failed for a reason of the store's (not a handler's: those
// are outcomes inside it) nacks its deliveries and raises the suspicion;
// before it receives again, Run looks at the store and, while it does not
// answer, waits for it instead of receiving the same messages again and
// again, each delivery spending an attempt of the message, until the
// crash-loop bound dead-lettered messages whose handler never ran.
type storeGate struct {
	suspect atomic.Bool
}

// storeWaitFirst and storeWaitMax bound the waits between two looks at a
// store that does not answer: doubling from the first to the most.
const (
	storeWaitFirst = 100 * time.Millisecond
	storeWaitMax   = 5 * time.Second
)

// awaitStore returns once the store answers (at once when nothing is
// suspected), or when ctx ends. A store that was closed never will: its
// error is returned, and Run ends with it.
func (c *Consumer) awaitStore(ctx context.Context) error {
	if !c.gate.suspect.Load() {
		return nil
	}
	wait := storeWaitFirst
	var since time.Time
	for ctx.Err() == nil {
		err := c.cfg.Store.DB().PingContext(ctx)
		if err == nil {
			c.gate.suspect.Store(false)
			if !since.IsZero() {
				c.cfg.Logger.Info("seqbox: the store answers again; receiving resumed", "consumer", c.cfg.Name,
					"unreachable_for", time.Since(since).Round(time.Millisecond))
			}
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		if storeClosed(err) {
			return fmt.Errorf("seqbox: consumer %s: its store is closed: %w", c.cfg.Name, err)
		}
		if since.IsZero() {
			since = time.Now()
			c.cfg.Logger.Error("seqbox: the store is unreachable; receiving paused until it answers", "consumer", c.cfg.Name, "err", err)
		} else {
			c.cfg.Logger.Debug("seqbox: the store is unreachable; still waiting", "consumer", c.cfg.Name,
				"for", time.Since(since).Round(time.Millisecond), "err", err)
		}
		sleep(ctx, wait)
		wait = min(2*wait, storeWaitMax)
	}
	return nil
}

// storeClosed reports whether err says the store was closed.
func storeClosed(err error) bool { return sqlstore.IsClosed(err) }
