package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/transport/embedded"
)

// stallAfter is how long a run may go without applying anything before
// the bench gives up on it.
const stallAfter = 60 * time.Second

// live is a Consumer.Run on the embedded queue with the record handler,
// measured by a recorder.
type live struct {
	rec    *recorder
	warn   *warnings
	start  time.Time
	cancel context.CancelFunc
	done   chan error
}

// startLive starts consuming e's queue as the bench consumer.
func startLive(ctx context.Context, e *env, workers, batch int) (*live, error) {
	l := &live{rec: newRecorder(), warn: &warnings{}, done: make(chan error, 1)}
	cfg := seqbox.Config{
		Name: Consumer, Store: beginTimed{Store: e.st, rec: l.rec}, Transport: timed{Transport: e.q, rec: l.rec},
		Workers: workers, BatchSize: batch, Observer: l.rec.observe, Logger: slog.New(l.warn),
	}
	if e.bulk {
		cfg.BatchHandler = replay.RecordBatchHandler(Consumer, e.pg)
	} else {
		cfg.Handler = replay.RecordHandlerOn(e.st.DB(), Consumer)
	}
	c, err := seqbox.NewConsumer(cfg)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	l.start = time.Now()
	go func() { l.done <- c.Run(rctx) }()
	return l, nil
}

// stop cancels Run and waits for it: batches in flight commit and ack.
func (l *live) stop() error {
	l.cancel()
	return <-l.done
}

// waitApplied waits until n messages are applied. It fails when Run
// stops, ctx ends, or nothing is applied for stallAfter.
func (l *live) waitApplied(ctx context.Context, n int64) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	last, lastAt := int64(-1), time.Now()
	for {
		got := l.rec.applied.Load()
		if got >= n {
			return nil
		}
		if got != last {
			last, lastAt = got, time.Now()
		} else if time.Since(lastAt) > stallAfter {
			return fmt.Errorf("consumer stalled at %d of %d applied (%d other outcomes)%s", got, n, l.rec.other.Load(), l.warnText())
		}
		select {
		case err := <-l.done:
			l.done <- err
			return fmt.Errorf("consumer stopped at %d of %d applied: %v%s", got, n, err, l.warnText())
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// waitDrained waits until q holds nothing, ready or leased: every message
// published so far is applied. It fails when Run stops, ctx ends, or the
// queue does not shrink for stallAfter.
func (l *live) waitDrained(ctx context.Context, q *embedded.Queue) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	last, lastAt := -1, time.Now()
	for {
		ready, leased, err := q.Depth(ctx)
		if err != nil {
			return err
		}
		left := ready + leased
		if left == 0 {
			return nil
		}
		if left != last {
			last, lastAt = left, time.Now()
		} else if time.Since(lastAt) > stallAfter {
			return fmt.Errorf("consumer stalled with %d messages left in the queue%s", left, l.warnText())
		}
		select {
		case err := <-l.done:
			l.done <- err
			return fmt.Errorf("consumer stopped with %d messages left in the queue: %v%s", left, err, l.warnText())
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// warnText is the consumer's first warning, for error messages.
func (l *live) warnText() string {
	n, first := l.warn.summary()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d consumer warnings, first: %s", n, first)
}
