package nats_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/transport"
	natstr "github.com/seqbox/seqbox/transport/nats"
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
		Workers: 4, BatchSize: 16,
		Policies: seqbox.Policies{HoldTimeout: 5 * time.Minute, FirstVersion: &first,
			Retry: seqbox.RetryPolicy{MaxAttempts: 10, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}},
		ExtendEvery: lease / 4, ExtendBy: lease,
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
	waitfor.That(t, within, fmt.Sprintf("%d effects", n), func() bool { return r.effects(t) >= n })
}

// waitAcked waits until the broker has every message of cfg's stream
// delivered to cfg's durable consumer and acknowledged (none pending, none
// awaiting an ack, the ack floor at the stream's last message): nothing
// can come back any more. It asks again through a leader election.
func waitAcked(t *testing.T, js jetstream.JetStream, cfg natstr.Config, within time.Duration) {
	t.Helper()
	state := "no answer yet"
	acked := waitfor.Until(within, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, cfg.Stream)
		if err != nil {
			return false
		}
		sinfo, err := st.Info(ctx)
		if err != nil {
			return false
		}
		cons, err := js.Consumer(ctx, cfg.Stream, cfg.Durable)
		if err != nil {
			return false
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return false
		}
		state = fmt.Sprintf("%d pending, %d awaiting an ack, ack floor %d of %d", info.NumPending, info.NumAckPending, info.AckFloor.Stream, sinfo.State.LastSeq)
		return info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream >= sinfo.State.LastSeq
	})
	if !acked {
		t.Fatalf("the broker has not every message acknowledged within %s: %s", within, state)
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
