package transporttest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
)

var firstVersion int64 = 1

// consume runs the consumers until done holds, then stops them; it fails
// the test (once they stopped) unless done held within within. It returns
// when done first held.
func (r *EffectsStore) consume(t testing.TB, within time.Duration, what string, done func() bool, cs ...*seqbox.Consumer) time.Time {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, len(cs))
	for _, c := range cs {
		wg.Go(func() { errs <- c.Run(ctx) })
	}
	var reached time.Time
	if waitfor.Until(within, done) {
		reached = time.Now()
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("consumer run: %v", err)
		}
	}
	if reached.IsZero() {
		t.Fatalf("not within %s: %s (%d effects)", within, what, r.count(t))
	}
	return reached
}

// count is the number of effect rows.
func (r *EffectsStore) count(t testing.TB) int {
	t.Helper()
	var n int
	if err := r.st.DB().QueryRow(`SELECT COUNT(*) FROM effects`).Scan(&n); err != nil {
		t.Fatalf("count effects: %v", err)
	}
	return n
}

// applied is consume's condition for want effect rows.
func (r *EffectsStore) applied(t testing.TB, want int) func() bool {
	return func() bool { return r.count(t) >= want }
}

// consumer builds a seqbox consumer on the rig's store over tr, a member
// of b, extending leases well within b's lease.
func (r *EffectsStore) consumer(t testing.TB, b Broker, tr transport.Transport, change func(*seqbox.Config)) *seqbox.Consumer {
	t.Helper()
	cfg := seqbox.Config{
		Name: "transporttest", Store: r.st, Transport: tr, Handler: Record,
		Workers: 4, BatchSize: 16,
		ExtendEvery: b.Lease / 4, ExtendBy: b.Lease,
		Policies: seqbox.Policies{HoldTimeout: time.Minute,
			// Every key starts at version 1: on a broker that reorders, a
			// first delivery of v2 is held for v1 instead of becoming the
			// baseline.
			FirstVersion: &firstVersion,
			Retry:        seqbox.RetryPolicy{MaxAttempts: 10, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond},
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

// inOrder fails unless every key in want was applied exactly at versions
// 1..want[key], in order.
func inOrder(t testing.TB, got map[string][]int64, want map[string]int64) {
	t.Helper()
	for key, top := range want {
		vs := got[key]
		ok := int64(len(vs)) == top
		for i, v := range vs {
			ok = ok && v == int64(i+1)
		}
		if !ok {
			t.Fatalf("key %s applied %v, want 1..%d once each in order", key, vs, top)
		}
	}
}

// idAndKey reads an event's id and partition key.
func idAndKey(t *testing.T, body []byte) (id, key string) {
	t.Helper()
	var e struct {
		ID  string `json:"id"`
		Key string `json:"partitionkey"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("delivered body is not the published event: %v: %s", err, body)
	}
	return e.ID, e.Key
}

// testAckAfterCommit: every ACK the consumer sends is for a message whose
// effect a separate connection can already read, that is, after COMMIT,
// and a handler failure nacks instead, so the message comes back and is
// applied once.
func testAckAfterCommit(t *testing.T, h Harness) {
	b := h.NewBroker(t)
	r := NewEffectsStore(t)
	ro, err := sql.Open("sqlite", "file:"+r.path+"?mode=ro")
	if err != nil {
		t.Fatalf("open reader: %v", err)
	}
	t.Cleanup(func() { _ = ro.Close() })
	want := map[string]int64{}
	var pub [][]byte
	for v := int64(1); v <= 6; v++ {
		for k := range 5 {
			key := fmt.Sprintf("inv-%d", k)
			pub = append(pub, Event(key, v))
			want[key] = v
		}
	}
	b.publish(t, pub...)
	chk := &ackCheck{t: t, inner: b.open(t), ro: ro}
	var failed sync.Map
	c := r.consumer(t, b, chk, func(cfg *seqbox.Config) {
		cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			if v, _ := ev.Version(); v%3 == 0 {
				if _, again := failed.LoadOrStore(ev.ID, true); !again {
					return errors.New("transient: first attempt fails")
				}
			}
			return Record(ctx, tx, ev)
		}
	})
	// Until every message is applied and acknowledged: the broker then
	// delivers none of them again, and every ack was checked.
	applied := r.applied(t, len(pub))
	r.consume(t, 90*time.Second, "every message applied and acknowledged", func() bool {
		return applied() && chk.ackedAll(pub)
	}, c)
	got, n := r.Applied(t)
	if n != len(pub) {
		t.Fatalf("%d effects for %d messages", n, len(pub))
	}
	inOrder(t, got, want)
	if chk.acks.Load() == 0 {
		t.Fatal("the consumer acknowledged nothing")
	}
}

// ackCheck wraps a transport: every Ack looks, through a read-only
// connection of its own (when ro is set), for the message's inbox
// identity, and fails the test when it is not committed yet; and it
// records which events were acknowledged.
type ackCheck struct {
	t     *testing.T
	inner transport.Transport
	ro    *sql.DB
	acks  atomic.Int64
	mu    sync.Mutex
	acked map[string]bool
}

func (a *ackCheck) Receive(ctx context.Context, max int) ([]transport.Delivery, error) {
	ds, err := a.inner.Receive(ctx, max)
	for i, d := range ds {
		ds[i] = &checkedDelivery{Delivery: d, check: a}
	}
	return ds, err
}

func (a *ackCheck) Close() error { return a.inner.Close() }

// committed fails the test unless the message's inbox identity is
// readable: the transaction that decided it (applied, or parked to wait
// for its predecessor) has committed.
func (a *ackCheck) committed(body []byte) {
	id, _ := idAndKey(a.t, body)
	if a.ro == nil {
		return
	}
	var n int
	err := a.ro.QueryRow(`SELECT COUNT(*) FROM seqbox_inbox WHERE consumer = 'transporttest' AND source = 'transporttest' AND id = $1`, id).Scan(&n)
	if err != nil {
		a.t.Errorf("read the inbox before ack: %v", err)
		return
	}
	if n != 1 {
		a.t.Errorf("ack of %s before its decision committed (%d inbox rows visible)", id, n)
	}
}

// ack records an acknowledgement the broker took.
func (a *ackCheck) ack(body []byte) {
	id, _ := idAndKey(a.t, body)
	a.acks.Add(1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.acked == nil {
		a.acked = map[string]bool{}
	}
	a.acked[id] = true
}

// ackedAll reports whether every event of bodies was acknowledged.
func (a *ackCheck) ackedAll(bodies [][]byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range bodies {
		var e struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(b, &e) != nil || !a.acked[e.ID] {
			return false
		}
	}
	return true
}

type checkedDelivery struct {
	transport.Delivery
	check *ackCheck
}

func (d *checkedDelivery) Ack(ctx context.Context) error {
	d.check.committed(d.Body())
	err := d.Delivery.Ack(ctx)
	if err == nil {
		d.check.ack(d.Body())
	}
	return err
}

// testLongHandlerAppliedOnce: a model call four leases long, with a second
// member waiting, is asked once and applied once, because the consumer
// extends the lease while it runs.
func testLongHandlerAppliedOnce(t *testing.T, h Harness) {
	b := h.NewBroker(t)
	r := NewEffectsStore(t)
	b.publish(t, Event("opp-2481", 1))
	var calls atomic.Int64
	long := func(cfg *seqbox.Config) {
		cfg.ExtendEvery = b.Lease / 4
		cfg.ExtendBy = b.Lease
		cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
			calls.Add(1)
			select {
			case <-time.After(4 * b.Lease):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return []byte(`{"action":"create-task"}`), nil
		}
	}
	one := [][]byte{Event("opp-2481", 1)}
	ta, tb := &ackCheck{t: t, inner: b.open(t)}, &ackCheck{t: t, inner: b.open(t)}
	first := r.consumer(t, b, ta, long)
	second := r.consumer(t, b, tb, long)
	// Until it is applied and acknowledged: the broker then delivers it to
	// neither member again.
	applied := r.applied(t, 1)
	r.consume(t, 4*b.Lease+60*time.Second, "the message applied and acknowledged", func() bool {
		return applied() && (ta.ackedAll(one) || tb.ackedAll(one))
	}, first, second)
	if _, n := r.Applied(t); n != 1 {
		t.Fatalf("%d effects for one message", n)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the model was asked %d times for one message", n)
	}
}

// testKeysInParallel: keys decide in parallel while each key applies in
// version order.
func testKeysInParallel(t *testing.T, h Harness) {
	b := h.NewBroker(t)
	r := NewEffectsStore(t)
	want := map[string]int64{}
	var pub [][]byte
	for v := int64(1); v <= 4; v++ {
		for k := range 8 {
			key := fmt.Sprintf("lead-%d", k)
			pub = append(pub, Event(key, v))
			want[key] = v
		}
	}
	b.publish(t, pub...)
	var active, peak atomic.Int64
	var early atomic.Int64
	// Each decision holds its slot until another one runs beside it: with
	// keys deciding in parallel that happens at once; if they could not,
	// the first would wait alone until the consumer stops.
	parallel := make(chan struct{})
	var once sync.Once
	c := r.consumer(t, b, b.open(t), func(cfg *seqbox.Config) {
		cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
			n := active.Add(1)
			defer active.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			if n >= 2 {
				once.Do(func() { close(parallel) })
			}
			select {
			case <-parallel:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return []byte("ok"), nil
		}
		cfg.Observer = func(res seqboxtype.Result) {
			if res.Outcome != seqboxtype.Applied {
				early.Add(1)
			}
		}
	})
	r.consume(t, 90*time.Second, "every message applied (the first decision waits for a second one to run beside it)", r.applied(t, len(pub)), c)
	if peak.Load() < 2 {
		t.Fatalf("decisions never ran in parallel (peak %d)", peak.Load())
	}
	got, _ := r.Applied(t)
	inOrder(t, got, want)
	if !h.Features.NoPerKeyOrder && early.Load() > 0 {
		t.Fatalf("a broker that keeps per-key order made %d deliveries arrive out of order", early.Load())
	}
}

// testGateOrdersReorderingBroker: over a wrapper that shuffles every batch
// and sends a share of first deliveries straight back, so versions arrive
// out of order and redeliveries overtake, seqbox's gate still applies each
// key once per version, in version order.
func testGateOrdersReorderingBroker(t *testing.T, h Harness) {
	b := h.NewBroker(t)
	r := NewEffectsStore(t)
	want := map[string]int64{}
	var pub [][]byte
	for v := int64(1); v <= 8; v++ {
		for k := range 6 {
			key := fmt.Sprintf("order-%d", k)
			pub = append(pub, Event(key, v))
			want[key] = v
		}
	}
	b.publish(t, pub...)
	sh := Shuffle(b.open(t), 1)
	c := r.consumer(t, b, sh, nil)
	r.consume(t, 120*time.Second, "every message applied", r.applied(t, len(pub)), c)
	got, n := r.Applied(t)
	if n != len(pub) {
		t.Fatalf("%d effects for %d messages", n, len(pub))
	}
	inOrder(t, got, want)
	if sh.Reordered() == 0 {
		t.Fatal("the shuffle never reordered a key: the test proved nothing")
	}
	t.Logf("%d deliveries reached the consumer out of version order", sh.Reordered())
}
