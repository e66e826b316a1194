package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/waitfor"
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
		Workers: 4, BatchSize: 16,
		Policies: seqbox.Policies{HoldTimeout: time.Minute, FirstVersion: &first,
			Retry: seqbox.RetryPolicy{MaxAttempts: 10, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}},
		Observer: func(res seqboxtype.Result) {
			e.mu.Lock()
			e.outcomes[res.Outcome]++
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
	waitfor.That(t, within, fmt.Sprintf("%d messages applied", want), func() bool {
		_, n := e.Applied(t)
		return n >= want
	})
}

// waitCommitted waits until group has committed, on every partition of
// r's topic, the offset past its last record: every record was delivered
// to a member of group and acknowledged, so none comes back.
func (r *rig) waitCommitted(t *testing.T, group string, within time.Duration) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.srv.Addrs()...))
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	behind := []string{"no answer yet"}
	all := waitfor.Until(within, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, r.topic)
		if err != nil || ends.Error() != nil {
			return false
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil || committed.Error() != nil {
			return false
		}
		behind = behind[:0]
		ends.Each(func(end kadm.ListedOffset) {
			if c, ok := committed.Lookup(end.Topic, end.Partition); end.Offset > 0 && (!ok || c.At < end.Offset) {
				behind = append(behind, fmt.Sprintf("partition %d at %d of %d", end.Partition, c.At, end.Offset))
			}
		})
		return len(behind) == 0
	})
	if !all {
		t.Fatalf("group %s has not committed every record within %s: %v", group, within, behind)
	}
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
