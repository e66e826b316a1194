package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// effects is transporttest's effects store plus the outcomes the
// consumers reached.
type effects struct {
	*transporttest.EffectsStore
	mu       sync.Mutex
	outcomes map[seqboxtype.Outcome]int
}

func newEffects(t *testing.T) *effects {
	return &effects{EffectsStore: transporttest.NewEffectsStore(t), outcomes: map[seqboxtype.Outcome]int{}}
}

// consumer is a seqbox consumer named name over tr.
func (e *effects) consumer(t *testing.T, tr transport.Transport, change func(*seqbox.Config)) *seqbox.Consumer {
	t.Helper()
	first := int64(1)
	cfg := seqbox.Config{
		Name: "kafkatest", Store: e.Store(), Transport: tr, Handler: transporttest.Record,
		Workers: 4, BatchSize: 16, HoldTimeout: time.Minute, FirstVersion: &first,
		Retry: seqbox.RetryPolicy{MaxAttempts: 10, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond},
		Observer: func(d seqboxtype.Result) {
			e.mu.Lock()
			e.outcomes[d.Outcome]++
			e.mu.Unlock()
		},
	}
	if change != nil {
		change(&cfg)
	}
	c, err := seqbox.NewConsumer(cfg)
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	return c
}

// outcome is how many decisions reached o.
func (e *effects) outcome(o seqboxtype.Outcome) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.outcomes[o]
}

// waitApplied waits until the effects table holds want rows.
func (e *effects) waitApplied(t *testing.T, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if _, n := e.Applied(t); n >= want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, n := e.Applied(t)
	t.Fatalf("%d of %d messages applied within %s", n, want, within)
}

// inOrder fails unless every key was applied exactly at 1..top, in order.
func inOrder(t *testing.T, got map[string][]int64, keys int, top int64) {
	t.Helper()
	if len(got) != keys {
		t.Fatalf("%d keys applied, want %d", len(got), keys)
	}
	for key, vs := range got {
		ok := int64(len(vs)) == top
		for i, v := range vs {
			ok = ok && v == int64(i+1)
		}
		if !ok {
			t.Fatalf("key %s applied %v, want 1..%d once each in order", key, vs, top)
		}
	}
}

// running runs c until the returned stop is called; stop fails the test
// if Run failed.
func running(t *testing.T, c *seqbox.Consumer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("consumer run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// event is a CloudEvent with id "<key>-v<version>".
func event(key string, version int64) []byte {
	return fmt.Appendf(nil, `{"specversion":"1.0","id":"%s-v%d","source":"kafkatest","type":"test.event",`+
		`"partitionkey":%q,"objectversion":%d,"data":{"n":%d}}`, key, version, key, version, version)
}

// publishAll publishes keys×versions events, version by version.
func publishAll(t *testing.T, p transport.Publisher, keys int, versions int64) int {
	t.Helper()
	var bodies [][]byte
	for v := int64(1); v <= versions; v++ {
		for k := range keys {
			bodies = append(bodies, event(fmt.Sprintf("key-%02d", k), v))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range bodies {
		if err := p.Publish(ctx, b); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	return len(bodies)
}
