package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
	"github.com/stretchr/testify/require"
)

// exerciseConcurrency: two deliveries of one identity racing on separate
// connections. The database is the arbiter: exactly one applies.
func exerciseConcurrency(t *testing.T, open Factory) {
	t.Run("SameIDConcurrently", func(t *testing.T) {
		t.Parallel()
		watch := newWaitWatch("", 2) // both transactions reach the identity's row
		b := setupInbox(t, watch.wrap(open))
		var calls atomic.Int32
		record := replay.RecordHandler(inboxConsumer)
		slow := func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			calls.Add(1)
			// Hold the transaction open until the other waits for it.
			if err := watch.wait(); err != nil {
				return err
			}
			return record(ctx, tx, ev)
		}
		raw := simple(t, "evt-race")
		// Two consumer instances with the same name: two workers or two
		// processes competing for copies of one message.
		consumers := []*seqbox.Consumer{
			b.consumer(func(c *seqbox.Config) { c.Handler = slow }),
			b.consumer(func(c *seqbox.Config) { c.Handler = slow }),
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		results := make([]seqboxtype.Outcome, len(consumers))
		errs := make([]error, len(consumers))
		for i, c := range consumers {
			wg.Go(func() {
				<-start
				got, err := c.Deliver(context.Background(), raw, 1)
				errs[i] = err
				if err == nil {
					results[i] = got[0].Outcome
				}
			})
		}
		watch.armed.Store(true)
		close(start)
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.ElementsMatch(t, []seqboxtype.Outcome{seqboxtype.Applied, seqboxtype.Duplicate}, results)
		require.Equal(t, int32(1), calls.Load(), "the loser never reaches the handler")
		require.Equal(t, 1, b.effectCount(""))
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts())
		require.Empty(t, b.audit(""), "a duplicate adds no audit row")
		require.Equal(t, 1, b.duplicates(""), "the repetition is counted on its inbox row")
	})

	t.Run("ManyIDsManyRacers", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		const ids, racers = 10, 3
		var wg sync.WaitGroup
		var applied, duplicates atomic.Int32
		errs := make(chan error, ids*racers)
		raws := make([][]byte, ids)
		for i := range ids {
			raws[i] = simple(t, fmt.Sprintf("evt-%d", i))
		}
		for r := range racers {
			c := b.consumer()
			wg.Go(func() {
				for i := range ids {
					results, err := c.Deliver(context.Background(), raws[(i+r)%ids], 1)
					if err != nil {
						errs <- err
						continue
					}
					switch results[0].Outcome {
					case seqboxtype.Applied:
						applied.Add(1)
					case seqboxtype.Duplicate:
						duplicates.Add(1)
					default:
						errs <- fmt.Errorf("unexpected outcome %s: %s", results[0].Outcome, results[0].Reason)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, int32(ids), applied.Load())
		require.Equal(t, int32(ids*(racers-1)), duplicates.Load())
		require.Equal(t, ids, b.effectCount(""))
		for i := range ids {
			require.Equal(t, 1, b.effectCount(fmt.Sprintf("evt-%d", i)))
		}
		require.Equal(t, int64(ids), b.counts().InboxRows)
	})
}

// fakeTransport hands out scripted batches, one per Receive call, and
// records what was settled. When gate is set, batches after the first wait
// for it to close. Once the script is used up, the next Receive closes
// release (if set) and every later one returns an empty batch.
type fakeTransport struct {
	mu       sync.Mutex
	script   [][]*fakeDelivery
	calls    int
	gate     chan struct{}
	release  chan struct{}
	released bool
	acks     []string
	nacks    []string
}

var _ transport.Transport = (*fakeTransport)(nil)

func (f *fakeTransport) delivery(body []byte) *fakeDelivery {
	return &fakeDelivery{f: f, body: body, attempt: 1}
}

func (f *fakeTransport) Receive(ctx context.Context, max int) ([]transport.Delivery, error) {
	f.mu.Lock()
	f.calls++
	if len(f.script) > 0 {
		next := f.script[0]
		f.script = f.script[1:]
		gate := f.gate
		first := f.calls == 1
		f.mu.Unlock()
		if gate != nil && !first {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		out := make([]transport.Delivery, len(next))
		for i, d := range next {
			out[i] = d
		}
		return out, nil
	}
	if f.release != nil && !f.released {
		// Every scripted batch has been handed to the consumer's scheduler.
		f.released = true
		close(f.release)
	}
	f.mu.Unlock()
	t := time.NewTimer(5 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, nil
	}
}

func (f *fakeTransport) Close() error { return nil }

func (f *fakeTransport) acked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.acks...)
}

func (f *fakeTransport) nacked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.nacks...)
}

type fakeDelivery struct {
	f       *fakeTransport
	body    []byte
	attempt int
}

func (d *fakeDelivery) id() string {
	var m struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(d.body, &m)
	return m.ID
}

func (d *fakeDelivery) Body() []byte { return d.body }
func (d *fakeDelivery) Attempt() int { return d.attempt }

func (d *fakeDelivery) Ack(context.Context) error {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	d.f.acks = append(d.f.acks, d.id())
	return nil
}

func (d *fakeDelivery) Nack(context.Context, time.Duration) error {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	d.f.nacks = append(d.f.nacks, d.id())
	return nil
}

func (d *fakeDelivery) Extend(context.Context, time.Duration) error { return nil }
