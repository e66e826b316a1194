package nats_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// rig is transporttest's effects store.
type rig struct{ *transporttest.EffectsStore }

func newRig(t *testing.T) *rig { return &rig{transporttest.NewEffectsStore(t)} }

// consumer builds a seqbox consumer named "nats-test" on the rig's store.
func (r *rig) consumer(t *testing.T, tr transport.Transport, lease time.Duration, change func(*seqbox.Config)) *seqbox.Consumer {
	t.Helper()
	first := int64(1)
	cfg := seqbox.Config{
		Name: "nats-test", Store: r.Store(), Transport: tr, Handler: transporttest.Record,
		Workers: 4, BatchSize: 16, HoldTimeout: 5 * time.Minute, FirstVersion: &first,
		ExtendEvery: lease / 4, ExtendBy: lease,
		Retry: seqbox.RetryPolicy{MaxAttempts: 10, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond},
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

// run starts the consumers; the returned stop ends them and fails the
// test if one returned an error.
func run(t *testing.T, cs ...*seqbox.Consumer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, len(cs))
	for _, c := range cs {
		wg.Go(func() { errs <- c.Run(ctx) })
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("consumer run: %v", err)
				}
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// effects is the number of effect rows.
func (r *rig) effects(t *testing.T) int {
	t.Helper()
	var n int
	if err := r.Store().DB().QueryRow(`SELECT COUNT(*) FROM effects`).Scan(&n); err != nil {
		t.Fatalf("count effects: %v", err)
	}
	return n
}

// waitEffects polls until the effects table holds at least n rows.
func (r *rig) waitEffects(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for r.effects(t) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d effects within %s", r.effects(t), n, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// appliedOnceInOrder fails unless every key in keys was applied exactly
// once at each version 1..versions, in version order, and nothing else.
func (r *rig) appliedOnceInOrder(t *testing.T, keys []string, versions int64) {
	t.Helper()
	rows, err := r.Store().DB().Query(`SELECT id, pkey, version FROM effects ORDER BY seq`)
	if err != nil {
		t.Fatalf("read effects: %v", err)
	}
	defer rows.Close()
	got := map[string][]int64{}
	ids := map[string]int{}
	for rows.Next() {
		var id, k string
		var v int64
		if err := rows.Scan(&id, &k, &v); err != nil {
			t.Fatalf("scan effects: %v", err)
		}
		got[k] = append(got[k], v)
		ids[id]++
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("%s applied %d times", id, n)
		}
	}
	if len(got) != len(keys) {
		t.Errorf("%d keys applied, want %d", len(got), len(keys))
	}
	for _, k := range keys {
		vs := got[k]
		ok := int64(len(vs)) == versions
		for i, v := range vs {
			ok = ok && v == int64(i+1)
		}
		if !ok {
			t.Errorf("key %s applied %v, want 1..%d once each in order", k, vs, versions)
		}
	}
}

// event is a structured-mode CloudEvent with id "<key>-v<version>".
func event(key string, version int64) []byte {
	return fmt.Appendf(nil, `{"specversion":"1.0","id":"%s-v%d","source":"nats-test","type":"test.event",`+
		`"partitionkey":%q,"objectversion":%d,"data":{"n":%d}}`, key, version, key, version, version)
}
