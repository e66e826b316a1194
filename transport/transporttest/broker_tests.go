package transporttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seqbox/seqbox/transport"
)

// Event returns a structured-mode CloudEvent with id "<key>-v<version>" on
// partition key key at objectversion version.
func Event(key string, version int64) []byte {
	return fmt.Appendf(nil, `{"specversion":"1.0","id":"%s-v%d","source":"transporttest","type":"test.event",`+
		`"partitionkey":%q,"objectversion":%d,"data":{"n":%d}}`, key, version, key, version, version)
}

// Receive collects n deliveries from tr, failing t unless they arrive
// within the given time.
func Receive(t testing.TB, tr transport.Transport, n int, within time.Duration) []transport.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var got []transport.Delivery
	for len(got) < n && ctx.Err() == nil {
		ds, err := tr.Receive(ctx, n-len(got))
		if err != nil && ctx.Err() == nil {
			t.Fatalf("receive: %v", err)
		}
		got = append(got, ds...)
	}
	if len(got) < n {
		t.Fatalf("received %d of %d deliveries within %s", len(got), n, within)
	}
	return got
}

// quiet fails the test if tr delivers anything for d.
func quiet(t *testing.T, tr transport.Transport, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for ctx.Err() == nil {
		ds, err := tr.Receive(ctx, 10)
		if err != nil && ctx.Err() == nil {
			t.Fatalf("receive: %v", err)
		}
		for _, dl := range ds {
			t.Fatalf("settled message came back (attempt %d): %s", dl.Attempt(), dl.Body())
		}
	}
}

// bodies returns the deliveries' bodies, sorted.
func bodies(ds []transport.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Body())
	}
	slices.Sort(out)
	return out
}

// ackAll acknowledges every delivery, one round trip when the transport can.
func ackAll(t *testing.T, tr transport.Transport, ds []transport.Delivery) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if b, ok := tr.(transport.BatchAcker); ok {
		if err := b.AckBatch(ctx, ds); err != nil {
			t.Fatalf("ack batch: %v", err)
		}
		return
	}
	for _, d := range ds {
		if err := d.Ack(ctx); err != nil {
			t.Fatalf("ack %s: %v", d.Body(), err)
		}
	}
}

// testRoundTrip: what is published arrives byte for byte, on attempt 1,
// and once acknowledged never comes back.
func testRoundTrip(t *testing.T, h Harness) {
	b := h.NewBroker(t)
	var want []string
	var pub [][]byte
	for v := int64(1); v <= 10; v++ {
		for _, k := range []string{"order-1", "order-2", "order-3"} {
			pub = append(pub, Event(k, v))
			want = append(want, string(Event(k, v)))
		}
	}
	// The broker's publish time (transport.PublishTimer) falls between
	// the publish and the receive, give or take a second of the broker's
	// clock and its precision (SQS: milliseconds).
	before := time.Now().Add(-time.Second)
	b.publish(t, pub...)
	tr := b.open(t)
	got := Receive(t, tr, len(pub), 30*time.Second)
	after := time.Now().Add(time.Second)
	slices.Sort(want)
	if g := bodies(got); !slices.Equal(g, want) {
		t.Fatalf("received bodies differ from published:\n got %q\nwant %q", g, want)
	}
	for _, d := range got {
		if d.Attempt() != 1 {
			t.Fatalf("first delivery reports attempt %d: %s", d.Attempt(), d.Body())
		}
		pt, ok := d.(transport.PublishTimer)
		if !ok {
			t.Fatalf("%T does not say when its message was published (transport.PublishTimer)", d)
		}
		if at := pt.PublishedAt(); at.Before(before) || at.After(after) {
			t.Fatalf("published at %s, not between the publish (%s) and the receive (%s): %s", at, before, after, d.Body())
		}
	}
	// Half one by one, half in one batch.
	ctx := context.Background()
	for _, d := range got[:len(got)/2] {
		if err := d.Ack(ctx); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	ackAll(t, tr, got[len(got)/2:])
	quiet(t, tr, 2*b.Lease)
}

// testRedeliveryAfterDeath: a member that goes away without settling loses
// its deliveries to another member, byte for byte (the identity is kept),
// with a higher attempt.
func testRedeliveryAfterDeath(t *testing.T, h Harness) {
	b := h.NewBroker(t)
	var pub [][]byte
	for v := int64(1); v <= 5; v++ {
		pub = append(pub, Event("acct-9", v))
	}
	b.publish(t, pub...)
	a := b.Open(t)
	first := Receive(t, a, len(pub), 30*time.Second)
	if err := a.Close(); err != nil {
		t.Fatalf("close member without settling: %v", err)
	}
	c := b.open(t)
	again := Receive(t, c, len(pub), b.redelivery()+30*time.Second)
	if g, w := bodies(again), bodies(first); !slices.Equal(g, w) {
		t.Fatalf("redelivered bodies differ:\n got %q\nwant %q", g, w)
	}
	for _, d := range again {
		if !h.Features.NoAttemptCount && d.Attempt() < 2 {
			t.Fatalf("redelivery reports attempt %d: %s", d.Attempt(), d.Body())
		}
	}
	ackAll(t, c, again)
	quiet(t, c, b.Lease)
}

// testNackWithDelay: a nacked delivery comes back, not before its delay
// (unless the broker says it cannot delay), and a zero-delay nack comes
// back promptly.
func testNackWithDelay(t *testing.T, h Harness) {
	b := h.NewBroker(t)
	b.publish(t, Event("cart-1", 1))
	tr := b.open(t)
	d := Receive(t, tr, 1, 30*time.Second)[0]
	delay := max(time.Second, b.Lease)
	start := time.Now()
	if err := d.Nack(context.Background(), delay); err != nil {
		t.Fatalf("nack: %v", err)
	}
	back := Receive(t, tr, 1, delay+b.redelivery()+30*time.Second)[0]
	took := time.Since(start)
	if !bytes.Equal(back.Body(), d.Body()) {
		t.Fatalf("nacked %s, got %s", d.Body(), back.Body())
	}
	if !h.Features.NoNackDelay && took < delay-250*time.Millisecond {
		t.Fatalf("nacked with delay %s, came back after %s", delay, took)
	}
	start = time.Now()
	if err := back.Nack(context.Background(), 0); err != nil {
		t.Fatalf("nack without delay: %v", err)
	}
	again := Receive(t, tr, 1, b.redelivery()+30*time.Second)[0]
	if !h.Features.NoAttemptCount && again.Attempt() < 3 {
		t.Fatalf("third delivery reports attempt %d", again.Attempt())
	}
	t.Logf("nack(%s) came back after %s; nack(0) after %s", delay, took, time.Since(start))
	ackAll(t, tr, []transport.Delivery{again})
	quiet(t, tr, b.Lease)
}

// testExtendKeepsLease: a delivery its member keeps extending stays with
// it past the lease: no member gets it again while a control message,
// received with it and not extended, comes back three times (so three
// leases ran out for an unextended delivery), and once acked it never
// returns. On a SharedLease broker, where no other member could take it
// and Extend is a no-op, extending must not fail and the ack holds.
func testExtendKeepsLease(t *testing.T, h Harness) {
	b := h.NewBroker(t)
	held, control := Event("loan-7", 1), Event("loan-8", 1)
	b.publish(t, held, control)
	a := b.open(t)
	var d, ctl transport.Delivery
	for _, dl := range Receive(t, a, 2, 30*time.Second) {
		if bytes.Equal(dl.Body(), held) {
			d = dl
		} else {
			ctl = dl
		}
	}
	if d == nil || ctl == nil {
		t.Fatalf("received one message twice, want %s and %s", held, control)
	}
	if h.Features.SharedLease {
		for range 3 {
			if err := d.Extend(context.Background(), b.Lease); err != nil {
				t.Fatalf("extend: %v", err)
			}
		}
		ackAll(t, a, []transport.Delivery{d, ctl})
		quiet(t, a, b.Lease)
		return
	}
	// Both members receive all along: the control's copies are counted
	// (and the third is acknowledged), any copy of the extended delivery
	// is a failure.
	var mu sync.Mutex
	var again []string
	back := 0
	watch := func(ctx context.Context, m transport.Transport) {
		for ctx.Err() == nil {
			ds, _ := m.Receive(ctx, 10)
			for _, dl := range ds {
				mu.Lock()
				if bytes.Equal(dl.Body(), control) {
					if back++; back == 3 {
						_ = dl.Ack(context.Background())
					}
				} else {
					again = append(again, fmt.Sprintf("%s (attempt %d)", dl.Body(), dl.Attempt()))
				}
				mu.Unlock()
			}
		}
	}
	other := b.open(t)
	ctxA, stopA := context.WithCancel(context.Background())
	ctxO, stopO := context.WithCancel(context.Background())
	var onA, onOther sync.WaitGroup
	onA.Go(func() { watch(ctxA, a) })
	onOther.Go(func() { watch(ctxO, other) })
	t.Cleanup(func() {
		stopA()
		stopO()
		onA.Wait()
		onOther.Wait()
	})
	// The member extends every third of a lease, as a consumer does
	// (Config.ExtendEvery), until the control has come back three times.
	tick := time.NewTicker(b.Lease / 3)
	defer tick.Stop()
	hold := time.NewTimer(3*b.redelivery() + 60*time.Second) // only a hang fails on it
	defer hold.Stop()
	for {
		mu.Lock()
		n := back
		mu.Unlock()
		if n >= 3 {
			break
		}
		if err := d.Extend(context.Background(), b.Lease); err != nil {
			t.Fatalf("extend: %v", err)
		}
		select {
		case <-tick.C:
		case <-hold.C:
			t.Fatalf("the unextended control came back %d times of 3", n)
		}
	}
	if err := d.Ack(context.Background()); err != nil {
		t.Fatalf("ack after extending: %v", err)
	}
	// Acknowledged, it comes back neither to its member (quiet) nor,
	// meanwhile, to the other one.
	stopA()
	onA.Wait()
	quiet(t, a, b.Lease)
	stopO()
	onOther.Wait()
	if len(again) > 0 {
		t.Fatalf("an extended delivery was delivered again: %q", again)
	}
}

// testPerKeyOrder: one member receiving and acknowledging batch by batch
// first sees each key's messages in the order they were published.
func testPerKeyOrder(t *testing.T, h Harness) {
	b := h.NewBroker(t)
	const keys, versions = 10, 20
	var pub [][]byte
	for v := int64(1); v <= versions; v++ {
		for k := range keys {
			pub = append(pub, Event(fmt.Sprintf("key-%02d", k), v))
		}
	}
	b.publish(t, pub...)
	tr := b.open(t)
	seen := map[string]bool{}
	order := map[string][]string{}
	deadline := time.Now().Add(60 * time.Second)
	ctx := context.Background()
	for len(seen) < len(pub) && time.Now().Before(deadline) {
		ds, err := tr.Receive(ctx, 50)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		for _, d := range ds {
			id, key := idAndKey(t, d.Body())
			if !seen[id] {
				seen[id] = true
				order[key] = append(order[key], id)
			}
		}
		if len(ds) > 0 {
			ackAll(t, tr, ds)
		}
	}
	if len(seen) != len(pub) {
		t.Fatalf("received %d of %d messages", len(seen), len(pub))
	}
	if h.Features.NoPerKeyOrder {
		return
	}
	for key, ids := range order {
		for i, id := range ids {
			if want := fmt.Sprintf("%s-v%d", key, i+1); id != want {
				t.Fatalf("key %s: delivery %d is %s, want %s (order %v)", key, i+1, id, want, ids)
			}
		}
	}
}

// testCloseInFlight: Close returns while deliveries are in flight, the
// member refuses to receive afterwards, and what it had not acknowledged
// comes back to another member; what it had acknowledged does not.
func testCloseInFlight(t *testing.T, h Harness) {
	b := h.NewBroker(t)
	var pub [][]byte
	for v := int64(1); v <= 10; v++ {
		pub = append(pub, Event(fmt.Sprintf("ship-%d", v%3), v))
	}
	b.publish(t, pub...)
	a := b.Open(t)
	got := Receive(t, a, len(pub), 30*time.Second)
	acked := got[:3]
	ackAll(t, a, acked)
	done := make(chan error, 1)
	go func() { done <- a.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("close with deliveries in flight: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("close with deliveries in flight did not return within 15s")
	}
	if _, err := a.Receive(context.Background(), 1); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("receive after close: %v, want transport.ErrClosed", err)
	}
	// Settling after close must return, with an error or not; the
	// message it named may then either come back or not.
	late := got[3]
	ackDone := make(chan error, 1)
	go func() { ackDone <- late.Ack(context.Background()) }()
	select {
	case <-ackDone:
	case <-time.After(15 * time.Second):
		t.Fatal("ack after close did not return within 15s")
	}
	c := b.open(t)
	want := bodies(got[4:])
	back := Receive(t, c, len(want), b.redelivery()+30*time.Second)
	ackAll(t, c, back)
	// Take whatever else comes within a lease: only late may be among it.
	ctx, cancel := context.WithTimeout(context.Background(), b.Lease)
	for ctx.Err() == nil {
		ds, _ := c.Receive(ctx, 10)
		if len(ds) > 0 {
			ackAll(t, c, ds)
		}
		back = append(back, ds...)
	}
	cancel()
	var extra []string
	for _, s := range bodies(back) {
		if i, found := slices.BinarySearch(want, s); found {
			want = slices.Delete(want, i, i+1)
		} else if s != string(late.Body()) {
			extra = append(extra, s)
		}
	}
	if len(want) > 0 || len(extra) > 0 {
		t.Fatalf("after close: missing %q, acknowledged but back %q", want, extra)
	}
}
