package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/transport/embedded"
)

// feed publishes the live stream of the purge bench in the background. A
// failed publish (SQLite: the write lock not obtained within the busy
// timeout) is counted and retried: it is a finding, not a reason to stop.
type feed struct {
	published atomic.Int64
	cancel    context.CancelFunc
	done      chan struct{}

	mu       sync.Mutex
	failures int
	first    string
}

// feedChunk is how many messages one publish transaction carries when
// the feed keeps a backlog; maxPublish is the most one carries at a rate.
const (
	feedChunk  = 200
	maxPublish = 10 * feedChunk
)

// startFeed publishes messages (source, "l0", "l1", ...) to q until
// stopped: at o.Rate per second, or, when o.Rate is 0, whenever the
// consumer's backlog falls below a few batches per worker, so that it
// never waits for work.
//
// At a rate, each tick (10 ms) publishes the messages due by then in one
// transaction, as a producer that batches its sends does, and it
// publishes again at once only to catch up a shortfall larger than one
// publish carries (feedDue; TestFeedPublishesOnceATick). Publishing again
// as soon as a publish returns, whatever is due by then, would make a
// transaction of every message or two at low rates, and take much of the
// machine at half of PostgreSQL's maximum (docs/benchmarks-history.md
// §13).
func startFeed(ctx context.Context, q *embedded.Queue, source, run string, o PurgeOptions, rec *recorder) *feed {
	return startFeedOf(ctx, q, func(i int) []byte { return Body(source, "l", run+"l", i, o.Keys) }, o, rec)
}

// startFeedOf is startFeed publishing body(0), body(1), ... (o.Keys
// unused): a stream whose identities and keys the caller chooses.
func startFeedOf(ctx context.Context, q *embedded.Queue, body func(i int) []byte, o PurgeOptions, rec *recorder) *feed {
	ctx, cancel := context.WithCancel(ctx)
	f := &feed{cancel: cancel, done: make(chan struct{})}
	backlog := int64(max(1000, 4*o.Workers*o.ConsumerBatch))
	start := time.Now()
	pub := func(n int) error {
		from := int(f.published.Load())
		bodies := make([][]byte, n)
		for i := range bodies {
			bodies[i] = body(from + i)
		}
		if err := q.PublishBatch(ctx, bodies); err != nil {
			return err
		}
		at := time.Now()
		ids := make([]string, n)
		for i, b := range bodies {
			ids[i] = idOf(b)
		}
		rec.published(ids, at)
		f.published.Add(int64(n))
		return nil
	}
	tick := 2 * time.Millisecond
	if o.Rate > 0 {
		tick = 10 * time.Millisecond
	}
	go func() {
		defer close(f.done)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			low := f.published.Load()-rec.applied.Load()-rec.other.Load() < backlog
			n, again := feedDue(o.Rate, time.Since(start), f.published.Load(), low)
			if n > 0 {
				err := pub(n)
				if err == nil && again {
					continue
				}
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					f.failed(err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return f
}

// feedDue is how many messages the feed publishes now, elapsed into its
// run with published out, and whether it publishes again as soon as they
// are out instead of at its next tick. At a rate it is what is due, and
// again only while a shortfall exceeds one publish (maxPublish); without
// one (rate 0), a chunk whenever the backlog is low, and again until it
// is not.
func feedDue(rate int, elapsed time.Duration, published int64, backlogLow bool) (n int, again bool) {
	if rate <= 0 {
		if backlogLow {
			return feedChunk, true
		}
		return 0, false
	}
	due := int(float64(rate)*elapsed.Seconds() - float64(published))
	if due <= 0 {
		return 0, false
	}
	return min(due, maxPublish), due > maxPublish
}

func (f *feed) failed(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures++
	if f.first == "" {
		f.first = err.Error()
	}
}

// stop ends the stream and reports how many publishes failed, and the
// first failure.
func (f *feed) stop() (int, string) {
	f.cancel()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failures, f.first
}
