package kafka_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// byID maps deliveries by event id.
func byID(t *testing.T, ds []transport.Delivery) map[string]transport.Delivery {
	t.Helper()
	out := map[string]transport.Delivery{}
	for _, d := range ds {
		id, _ := idOf(t, d)
		out[id] = d
	}
	return out
}

// TestAckCommitsContiguousPrefix: an acknowledgement out of order does not
// commit past a record still unacknowledged; the commit moves once the
// gap is filled, and only up to the next gap.
func TestAckCommitsContiguousPrefix(t *testing.T) {
	r := newRig(t, 1)
	publishAll(t, r.publisher(t), 1, 4) // key-00 v1..v4 at offsets 0..3
	ctx := context.Background()

	a := r.open(t, "prefix")
	got := byID(t, transporttest.Receive(t, a, 4, 30*time.Second))
	for _, id := range []string{"key-00-v2", "key-00-v4"} {
		if err := got[id].Ack(ctx); err != nil {
			t.Fatalf("ack %s: %v", id, err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	b := r.open(t, "prefix")
	again := byID(t, transporttest.Receive(t, b, 4, 30*time.Second))
	if len(again) != 4 {
		t.Fatalf("after acks of offsets 1 and 3 only, %d distinct records came back, want all 4", len(again))
	}
	if err := again["key-00-v1"].Ack(ctx); err != nil { // fills the gap: 0 and 1 are done
		t.Fatalf("ack v1: %v", err)
	}
	if err := again["key-00-v2"].Ack(ctx); err != nil {
		t.Fatalf("ack v2: %v", err)
	}
	if err := again["key-00-v4"].Ack(ctx); err != nil { // past the gap at offset 2
		t.Fatalf("ack v4: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	c := r.open(t, "prefix")
	last := transporttest.Receive(t, c, 2, 30*time.Second)
	ids := []string{}
	for _, d := range last {
		id, _ := idOf(t, d)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"key-00-v3", "key-00-v4"}) {
		t.Fatalf("after the prefix 0..1 was committed, got %v back, want v3 and v4", ids)
	}
	quietFor(t, c, time.Second)
}

// TestAttemptSurvivesMembers: Kafka counts no deliveries; the transport
// records them in the commit metadata, so the record at the committed
// offset counts up across members that die holding it (a crash loop), and
// any record an earlier member handed out comes back with attempt >= 2.
// Within a member, a nack counts too.
func TestAttemptSurvivesMembers(t *testing.T) {
	r := newRig(t, 1)
	publishAll(t, r.publisher(t), 1, 3)
	for round := 1; round <= 3; round++ {
		m := r.open(t, "attempts")
		got := byID(t, transporttest.Receive(t, m, 3, 30*time.Second))
		if a := got["key-00-v1"].Attempt(); a != round {
			t.Fatalf("member %d: the record at the committed offset reports attempt %d, want %d", round, a, round)
		}
		for _, id := range []string{"key-00-v2", "key-00-v3"} {
			if a, want := got[id].Attempt(), min(round, 2); a != want {
				t.Fatalf("member %d: %s reports attempt %d, want %d", round, id, a, want)
			}
		}
		if round < 3 {
			if err := m.Close(); err != nil { // dies holding all three
				t.Fatalf("close: %v", err)
			}
			continue
		}
		if err := got["key-00-v1"].Nack(context.Background(), 0); err != nil {
			t.Fatalf("nack: %v", err)
		}
		back := transporttest.Receive(t, m, 1, 30*time.Second)[0]
		if id, _ := idOf(t, back); id != "key-00-v1" || back.Attempt() != 4 {
			t.Fatalf("nacked key-00-v1 came back as %s with attempt %d, want attempt 4", id, back.Attempt())
		}
	}
}

// quietFor fails the test if tr delivers anything for d.
func quietFor(t *testing.T, tr transport.Transport, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for ctx.Err() == nil {
		ds, _ := tr.Receive(ctx, 10)
		for _, dl := range ds {
			t.Fatalf("settled record came back (attempt %d): %s", dl.Attempt(), dl.Body())
		}
	}
}
