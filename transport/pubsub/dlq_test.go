package pubsub_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport/pubsub"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// TestDeadLetterIntoSeqbox: with seqbox's Retry.MaxAttempts (3) below the
// subscription's MaxDeliveryAttempts (5), a handler that always fails
// puts the message in seqbox's DLQ after 3 attempts with its identity and
// body unchanged; the consumer then acknowledges it, so Pub/Sub neither
// delivers it again nor forwards it to its dead-letter topic.
func TestDeadLetterIntoSeqbox(t *testing.T) {
	srv := startBroker(t)
	cfg := fresh(t, srv, func(c *pubsub.Config) { c.MaxDeliveryAttempts, c.RetryMaxAttempts = 5, 3 })
	body := transporttest.Event("loan-7", 1)
	if err := publisher(t, cfg).Publish(context.Background(), body); err != nil {
		t.Fatalf("publish: %v", err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "seqbox.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var calls atomic.Int64
	c, err := seqbox.NewConsumer(seqbox.Config{
		Name: "loans", Store: st, Transport: open(t, cfg),
		Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond}},
		Handler: func(context.Context, seqbox.Tx, seqboxtype.Event) error {
			calls.Add(1)
			return errors.New("downstream is down")
		},
	})
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var dead []seqboxDeadLetter
	inDLQ := waitfor.Until(60*time.Second, func() bool {
		dead = deadLetters(t, st, "loans")
		return len(dead) > 0
	})
	// Acknowledged at the broker, it can never come back (the counts
	// below say it did not).
	acked := inDLQ && waitfor.Until(60*time.Second, func() bool {
		ms := srv.Fake().Messages()
		return len(ms) == 1 && ms[0].Acks > 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(dead) != 1 {
		t.Fatalf("%d DLQ rows, want 1", len(dead))
	}
	if !acked {
		t.Fatal("the dead-lettered message was never acknowledged at the broker")
	}
	d := dead[0]
	if d.ID != "loan-7-v1" || d.Source != "transporttest" || string(d.Envelope) != string(body) || d.Attempts != 3 {
		t.Fatalf("DLQ row id=%s source=%s attempts=%d envelope=%s", d.ID, d.Source, d.Attempts, d.Envelope)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("handler ran %d times, want 3", n)
	}
	ms := srv.Fake().Messages()
	if len(ms) != 1 || ms[0].Acks != 1 || ms[0].Deliveries != 3 {
		t.Fatalf("broker: %d messages; want one delivered 3 times and acknowledged once", len(ms))
	}
	// Pub/Sub's dead-letter topic, the backstop, received nothing.
	dl := open(t, pubsub.Config{Project: cfg.Project, Endpoint: cfg.Endpoint, Subscription: cfg.Subscription + "-dead-letter"})
	if ds, err := dl.Receive(context.Background(), 10); err != nil || len(ds) > 0 {
		t.Fatalf("Pub/Sub dead-letter subscription: %d messages, %v", len(ds), err)
	}
}
