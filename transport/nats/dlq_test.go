package nats_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	natstr "github.com/seqbox/seqbox/transport/nats"
)

// TestFailingMessageEndsInSeqboxDLQ: a handler that always fails, with
// seqbox's Retry.MaxAttempts 3 and JetStream's MaxDeliver at
// MaxDeliverFor(3): after three attempts the message is in seqbox's DLQ
// with its id, source and body unchanged, it is acknowledged at the
// broker (nothing pending, no delivery beyond the third) and the handler
// is not called again.
func TestFailingMessageEndsInSeqboxDLQ(t *testing.T) {
	const lease = 2 * time.Second
	const maxAttempts = 3
	s := startServer(t)
	cfg := freshConfig(s.URL(), lease)
	cfg.MaxAttempts, cfg.MaxDeliver = maxAttempts, natstr.MaxDeliverFor(maxAttempts)
	body := event("poison-1", 1)
	if err := publisherT(t, cfg).Publish(context.Background(), body); err != nil {
		t.Fatalf("publish: %v", err)
	}
	r := newRig(t)
	var calls atomic.Int64
	c := r.consumer(t, openT(t, cfg), lease, func(c *seqbox.Config) {
		c.Retry.MaxAttempts = maxAttempts
		c.Handler = func(context.Context, seqbox.Tx, seqboxtype.Event) error {
			calls.Add(1)
			return errors.New("downstream refuses")
		}
	})
	stop := run(t, c)
	ctx := context.Background()
	var letters []store.DeadLetter
	waitfor.That(t, 30*time.Second, "the message in seqbox's DLQ", func() bool {
		var err error
		if letters, err = r.Store().Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: "nats-test", All: false}); err != nil {
			t.Fatalf("list DLQ: %v", err)
		}
		return len(letters) > 0
	})
	if len(letters) != 1 {
		t.Fatalf("DLQ holds %d messages, want 1", len(letters))
	}
	// Once the broker has the dead-lettered message acknowledged it can
	// never come back: wait for that rather than for a lease or two.
	waitAcked(t, inspect(t, s.URL()), cfg, 30*time.Second)
	stop()
	letter := letters[0]
	if letter.ID != "poison-1-v1" || letter.Source != "nats-test" || string(letter.Envelope) != string(body) || letter.Attempts != maxAttempts {
		t.Fatalf("DLQ row id=%q source=%q attempts=%d envelope=%s; want the published event after %d attempts",
			letter.ID, letter.Source, letter.Attempts, letter.Envelope, maxAttempts)
	}
	if n := calls.Load(); n != maxAttempts {
		t.Fatalf("handler called %d times, want %d", n, maxAttempts)
	}
	cons, err := inspect(t, s.URL()).Consumer(ctx, cfg.Stream, cfg.Durable)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatalf("consumer info: %v", err)
	}
	if info.NumAckPending != 0 || info.NumPending != 0 || info.AckFloor.Stream != 1 || info.Delivered.Consumer != maxAttempts {
		t.Fatalf("broker: %d pending acks, %d undelivered, ack floor %d, %d deliveries; want 0, 0, 1, %d",
			info.NumAckPending, info.NumPending, info.AckFloor.Stream, info.Delivered.Consumer, maxAttempts)
	}
}
