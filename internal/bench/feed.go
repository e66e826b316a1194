package bench

import (
	"context"
	"strconv"
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

// feedChunk is how many messages one publish transaction carries.
const feedChunk = 200

// startFeed publishes messages (source, "l0", "l1", ...) to q until
// stopped: at o.Rate per second, or, when o.Rate is 0, whenever the
// consumer's backlog falls below a few batches per worker, so that it
// never waits for work.
func startFeed(ctx context.Context, q *embedded.Queue, source, run string, o PurgeOptions, rec *recorder) *feed {
	ctx, cancel := context.WithCancel(ctx)
	f := &feed{cancel: cancel, done: make(chan struct{})}
	backlog := int64(max(1000, 4*o.Workers*o.ConsumerBatch))
	start := time.Now()
	pub := func(n int) error {
		from := int(f.published.Load())
		bodies := make([][]byte, n)
		for i := range bodies {
			bodies[i] = Body(source, "l", run+"l", from+i, o.Keys)
		}
		if err := q.PublishBatch(ctx, bodies); err != nil {
			return err
		}
		at := time.Now()
		ids := make([]string, n)
		for i := range ids {
			ids[i] = "l" + strconv.Itoa(from+i) // Body's identity
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
			var n int
			if o.Rate > 0 {
				n = int(float64(o.Rate)*time.Since(start).Seconds() - float64(f.published.Load()))
			} else if f.published.Load()-rec.applied.Load()-rec.other.Load() < backlog {
				n = feedChunk
			}
			if n > 0 {
				err := pub(min(n, 10*feedChunk))
				if err == nil {
					continue
				}
				if ctx.Err() != nil {
					return
				}
				f.failed(err)
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
