package kafka_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// TestRebalanceRevokesDeliveries: when a second member joins, every
// delivery the first still holds loses its lease (Ack, Nack and Extend
// report ErrLeaseLost), what it had acknowledged stays committed, and the
// rest comes back, to one member or the other, from the committed offset.
func TestRebalanceRevokesDeliveries(t *testing.T) {
	r := newRig(t, 2)
	n := publishAll(t, r.publisher(t), 6, 3)
	a := r.open(t, "g")
	held := transporttest.Receive(t, a, n, 30*time.Second)
	// Acknowledge the first delivery, the head of its partition, so the
	// commit moves.
	if err := held[0].Ack(context.Background()); err != nil {
		t.Fatalf("ack before the rebalance: %v", err)
	}
	firstID, _ := idOf(t, held[0])
	acked := map[string]bool{firstID: true}
	b := r.open(t, "g") // returns once the group rebalanced
	for _, d := range held {
		if id, _ := idOf(t, d); acked[id] {
			continue
		}
		if err := d.Extend(context.Background(), time.Second); !errors.Is(err, transport.ErrLeaseLost) {
			t.Fatalf("extend after revoke: %v, want ErrLeaseLost", err)
		}
		if err := d.Nack(context.Background(), 0); !errors.Is(err, transport.ErrLeaseLost) {
			t.Fatalf("nack after revoke: %v, want ErrLeaseLost", err)
		}
		if err := d.Ack(context.Background()); !errors.Is(err, transport.ErrLeaseLost) {
			t.Fatalf("ack after revoke: %v, want ErrLeaseLost", err)
		}
	}
	// Everything but the acknowledged record comes back, split between
	// the members, as a redelivery.
	back := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for len(back) < n-1 && time.Now().Before(deadline) {
		for _, m := range []transport.Transport{a, b} {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			ds, err := m.Receive(ctx, n)
			cancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("receive after the rebalance: %v", err)
			}
			for _, d := range ds {
				id, _ := idOf(t, d)
				if acked[id] {
					t.Fatalf("acknowledged %s came back after the rebalance", id)
				}
				back[id] = d.Attempt()
				if err := d.Ack(context.Background()); err != nil {
					t.Fatalf("ack by the new owner: %v", err)
				}
			}
		}
	}
	if len(back) != n-1 {
		t.Fatalf("%d of %d unacknowledged records came back", len(back), n-1)
	}
	for id, attempt := range back {
		if attempt < 2 {
			t.Fatalf("redelivery of %s after the rebalance reports attempt %d", id, attempt)
		}
	}
}

// idOf reads a delivery's event id and key.
func idOf(t *testing.T, d transport.Delivery) (id, key string) {
	t.Helper()
	ev, err := seqboxtype.ParseEvent(d.Body())
	if err != nil {
		t.Fatalf("delivered body is not an event: %v", err)
	}
	return ev.ID, ev.PartitionKey
}

// TestRebalanceMidBatchAppliesOnce: a seqbox consumer holds a batch it
// has not committed yet when a second member joins and the partitions are
// revoked. Its late acknowledgements report ErrLeaseLost and commit
// nothing; the partitions' new owners read from the last committed offset
// and their copies are duplicates in the inbox. Every message is applied
// exactly once, each key in version order.
func TestRebalanceMidBatchAppliesOnce(t *testing.T) {
	r := newRig(t, 4)
	const keys, versions = 8, 6
	n := publishAll(t, r.publisher(t), keys, versions)
	fx := newEffects(t)

	release := make(chan struct{})
	first := &watched{Transport: r.open(t, "mid-batch"), received: make(chan struct{})}
	ca := fx.consumer(t, first, func(cfg *seqbox.Config) {
		cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			select { // hold the batch uncommitted until the rebalance is over
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return transporttest.Record(ctx, tx, ev)
		}
	})
	stopA := running(t, ca)
	select {
	case <-first.received:
	case <-time.After(30 * time.Second):
		t.Fatal("the first member received nothing")
	}
	second := &watched{Transport: r.open(t, "mid-batch"), received: make(chan struct{})}
	close(release)
	stopB := running(t, fx.consumer(t, second, nil))
	fx.waitApplied(t, n, 90*time.Second)
	// Late redeliveries (the new owners read from the last committed
	// offset) have all arrived, and been settled, once the group has
	// committed every record; the checks below say they stayed
	// duplicates.
	r.waitCommitted(t, "mid-batch", 60*time.Second)
	stopA()
	stopB()

	got, applied := fx.Applied(t)
	if applied != n {
		t.Fatalf("%d effects for %d messages", applied, n)
	}
	inOrder(t, got, keys, versions)
	if first.lost.Load() == 0 {
		t.Fatal("the first member's acknowledgements never reported a lost lease: the rebalance did not happen mid-batch")
	}
	if fx.outcome(seqboxtype.Duplicate) == 0 {
		t.Fatal("no redelivery was recognised as a duplicate: the new owners did not start from the committed offset")
	}
	t.Logf("lease lost on %d acknowledgement calls; %d duplicates absorbed", first.lost.Load(), fx.outcome(seqboxtype.Duplicate))
}

// watched wraps a member: it signals its first non-empty batch and counts
// acknowledgements refused with ErrLeaseLost.
type watched struct {
	transport.Transport
	once     sync.Once
	received chan struct{}
	lost     atomic.Int64
	failed   atomic.Int64
}

func (w *watched) Receive(ctx context.Context, n int) ([]transport.Delivery, error) {
	ds, err := w.Transport.Receive(ctx, n)
	if len(ds) > 0 {
		w.once.Do(func() { close(w.received) })
	}
	return ds, err
}

func (w *watched) AckBatch(ctx context.Context, ds []transport.Delivery) error {
	err := w.Transport.(transport.BatchAcker).AckBatch(ctx, ds)
	if errors.Is(err, transport.ErrLeaseLost) {
		w.lost.Add(1)
	}
	if err != nil && !errors.Is(err, transport.ErrLeaseLost) {
		w.failed.Add(1)
	}
	return err
}
