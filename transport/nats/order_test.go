package nats_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/seqbox/seqbox/transport"
)

// TestRedeliveryGoesFirst pins down the order guarantee that survives a
// nack: JetStream sends a message due for redelivery before any message
// not delivered yet, so a nacked v1 comes back before v3, v4, v5 — but
// after v2, which was already delivered. Only the order of first
// deliveries is the stream's; seqbox's gate orders the rest.
func TestRedeliveryGoesFirst(t *testing.T) {
	s := startServer(t)
	cfg := freshConfig(s.URL(), 5*time.Second)
	pub := publisherT(t, cfg)
	ctx := context.Background()
	for v := int64(1); v <= 5; v++ {
		if err := pub.Publish(ctx, event("acct-7", v)); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	tr := openT(t, cfg)
	first := receiveN(t, tr, 2)
	if got := ids(t, first); got[0] != "acct-7-v1" || got[1] != "acct-7-v2" {
		t.Fatalf("first deliveries %v, want v1, v2", got)
	}
	if err := first[0].Nack(ctx, 0); err != nil {
		t.Fatalf("nack: %v", err)
	}
	if err := first[1].Ack(ctx); err != nil {
		t.Fatalf("ack: %v", err)
	}
	rest := receiveN(t, tr, 4)
	got := ids(t, rest)
	want := []string{"acct-7-v1", "acct-7-v3", "acct-7-v4", "acct-7-v5"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("after nacking v1: %v, want %v", got, want)
		}
	}
	if rest[0].Attempt() != 2 || rest[1].Attempt() != 1 {
		t.Fatalf("attempts %d, %d; want 2 for the redelivery, 1 for the first delivery", rest[0].Attempt(), rest[1].Attempt())
	}
	if err := tr.AckBatch(ctx, rest); err != nil {
		t.Fatalf("ack batch: %v", err)
	}
}

// receiveN receives exactly n deliveries, in the order handed out.
func receiveN(t *testing.T, tr transport.Transport, n int) []transport.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []transport.Delivery
	for len(out) < n {
		ds, err := tr.Receive(ctx, n-len(out))
		if err != nil {
			t.Fatalf("receive %d of %d: %v", len(out), n, err)
		}
		out = append(out, ds...)
	}
	return out
}

// ids returns the deliveries' event ids in order.
func ids(t *testing.T, ds []transport.Delivery) []string {
	t.Helper()
	out := make([]string, len(ds))
	for i, d := range ds {
		var e struct{ ID string }
		if err := json.Unmarshal(d.Body(), &e); err != nil {
			t.Fatalf("body: %v", err)
		}
		out[i] = e.ID
	}
	return out
}
