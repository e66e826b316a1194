package serve

import (
	"context"
	"sync"
	"time"

	"github.com/seqbox/seqbox/store"
)

// The console polls the overview every 2 s. Counting the inbox reads
// every identity the retention keeps: 3.6–7.5 s at ten million
// (docs/benchmarks.md, "Growth: seqbox bench prefill"), so a console left open kept a core
// reading the database the pipeline writes. The counts that read every
// identity or key are taken again only once they are older than
// inboxCountsWait of the time the last one took.
const (
	// inboxCountsFresh is how long an inbox count is fresh at least.
	inboxCountsFresh = 2 * time.Second
	// inboxCountsFactor is how many times its own duration a count stays
	// fresh: a count that took 7 s is taken again after 140 s, a
	// twentieth of a core's time at most.
	inboxCountsFactor = 20
)

// inboxCountsWait is how long an inbox count that took took stays fresh.
func inboxCountsWait(took time.Duration) time.Duration {
	return max(inboxCountsFresh, inboxCountsFactor*took)
}

// inboxCounts caches the counts that read every identity or key
// (store.Counts' InboxRows, Applied and Keys). One count runs at a time;
// while it runs, the others answer with the last one.
type inboxCounts struct {
	// now is the cache's clock (time.Now; a test moves its own).
	now func() time.Time

	mu    sync.Mutex
	c     store.Counts
	at    time.Time     // when the last count began; zero before the first
	fresh time.Duration // how long it stays fresh
	// running is closed when the count under way ends; nil when none is.
	running chan struct{}
}

// counts returns the consumer's counts: the stuck ones read now, the
// inbox's and the keys' from the last count when it is fresh (or one is
// under way), and when they were counted.
func (s *Server) counts(ctx context.Context) (store.Counts, time.Time, error) {
	c, err := s.store.Executor().StuckCounts(ctx, s.opt.Consumer)
	if err != nil {
		return c, time.Time{}, err
	}
	bulk, at, err := s.inboxCounts.get(ctx, func(ctx context.Context) (store.Counts, error) {
		return s.store.Executor().Counts(ctx, s.opt.Consumer)
	})
	c.InboxRows, c.Applied, c.Keys = bulk.InboxRows, bulk.Applied, bulk.Keys
	return c, at, err
}

// get returns the cached counts when fresh, or while another caller
// counts; else it counts with count and keeps the result.
func (ic *inboxCounts) get(ctx context.Context, count func(context.Context) (store.Counts, error)) (store.Counts, time.Time, error) {
	for {
		ic.mu.Lock()
		now := ic.now()
		switch {
		case !ic.at.IsZero() && (now.Sub(ic.at) < ic.fresh || ic.running != nil):
			c, at := ic.c, ic.at
			ic.mu.Unlock()
			return c, at, nil
		case ic.running != nil:
			// The first count is under way: wait for it.
			running := ic.running
			ic.mu.Unlock()
			select {
			case <-running:
				continue
			case <-ctx.Done():
				return store.Counts{}, time.Time{}, ctx.Err()
			}
		}
		done := make(chan struct{})
		ic.running = done
		ic.mu.Unlock()
		c, err := count(ctx)
		ic.mu.Lock()
		if err == nil {
			ic.c, ic.at, ic.fresh = c, now, inboxCountsWait(ic.now().Sub(now))
		}
		ic.running = nil
		close(done)
		ic.mu.Unlock()
		return c, now, err
	}
}
