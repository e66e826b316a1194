// Package heartbeat renews a lease while the work it vouches for runs: a
// decision's claim, an effect ledger's pending row. A process that dies
// stops renewing, and its lease runs out within a few beats.
package heartbeat

import (
	"context"
	"sync"
	"time"
)

// Start calls beat every interval until the returned stop is called or
// ctx ends; stop waits for a beat in progress.
func Start(ctx context.Context, every time.Duration, beat func(context.Context)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				beat(ctx)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
