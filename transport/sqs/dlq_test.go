package sqs_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	broker "github.com/seqbox/seqbox/internal/broker/sqs"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/sqs"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// openStore opens a seqbox store in a fresh SQLite file.
func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "seqbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestDeadLetter: a handler that always fails is tried Retry.MaxAttempts
// times; the message then sits in seqbox's DLQ with its identity and body
// unchanged, and the queue does not deliver it again. The queue's redrive
// policy allows MinMaxReceiveCount receives, so seqbox dead-letters first.
func TestDeadLetter(t *testing.T) {
	const maxAttempts = 3
	e := newEnv(t, 2*time.Second, broker.Queue{})
	ctx := context.Background()
	dlqURL, dlqARN, err := broker.CreateQueue(ctx, e.client, broker.NewQueueName("dlq", true), broker.Queue{})
	if err != nil {
		t.Fatal(err)
	}
	url, _, err := broker.CreateQueue(ctx, e.client, broker.NewQueueName("poison", true), broker.Queue{
		VisibilityTimeout: 2 * time.Second, MaxReceiveCount: sqs.MinMaxReceiveCount(maxAttempts), DeadLetterQueueARN: dlqARN})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sqs.NewPublisher(e.client, url)
	if err != nil {
		t.Fatal(err)
	}
	body := transporttest.Event("acct-1", 1)
	if err := pub.Publish(ctx, body); err != nil {
		t.Fatal(err)
	}
	tr, err := sqs.Open(ctx, sqs.Config{Client: e.client, QueueURL: url, MaxAttempts: maxAttempts})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	st := openStore(t)
	var calls atomic.Int64
	c, err := seqbox.NewConsumer(seqbox.Config{
		Name: "dlq-test", Store: st, Transport: tr,
		Handler: func(context.Context, seqbox.Tx, seqboxtype.Event) error {
			calls.Add(1)
			return errors.New("downstream is down")
		},
		Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: maxAttempts, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// Idle longer than a nack's delay (rounded up to one second) plus a
	// lease, so the retries finish before the run ends.
	if err := c.RunUntilIdle(runCtx, 4*time.Second); err != nil {
		t.Fatalf("run: %v", err)
	}
	if n := calls.Load(); n != maxAttempts {
		t.Fatalf("handler called %d times, want %d", n, maxAttempts)
	}
	letters, err := st.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: "dlq-test", All: false})
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 {
		t.Fatalf("%d DLQ rows, want 1", len(letters))
	}
	if letter := letters[0]; letter.ID != "acct-1-v1" || letter.Source != "transporttest" || string(letter.Envelope) != string(body) || letter.Attempts != maxAttempts {
		t.Fatalf("DLQ row %+v: want identity transporttest/acct-1-v1, body unchanged, %d attempts", letter, maxAttempts)
	}
	quiet(t, tr, 3*time.Second)
	if got := (env{client: e.client, url: dlqURL}).drain(t, -1, time.Second); len(got) > 0 {
		t.Fatalf("the broker's dead-letter queue got %d messages", len(got))
	}
}

// quiet fails if tr delivers anything for d.
func quiet(t *testing.T, tr transport.Transport, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for ctx.Err() == nil {
		ds, _ := tr.Receive(ctx, 10)
		if len(ds) > 0 {
			t.Fatalf("delivered again: %s (attempt %d)", ds[0].Body(), ds[0].Attempt())
		}
	}
}

// TestInboxCatchesRepublish: goaws forgets a deduplication id once its
// message is deleted (real SQS keeps it five minutes, and forgets it
// after), so an event published again after it was consumed is stored
// again; seqbox's inbox recognises it and applies nothing twice.
func TestInboxCatchesRepublish(t *testing.T) {
	e := newEnv(t, 2*time.Second, broker.Queue{})
	ctx := context.Background()
	st := openStore(t)
	var mu sync.Mutex
	outcomes := map[seqboxtype.Outcome]int{}
	c, err := seqbox.NewConsumer(seqbox.Config{
		Name: "inbox-test", Store: st, Transport: e.open(t),
		Handler: func(context.Context, seqbox.Tx, seqboxtype.Event) error { return nil },
		Observer: func(res seqboxtype.Result) {
			mu.Lock()
			defer mu.Unlock()
			outcomes[res.Outcome]++
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := transporttest.Event("opp-7", 1)
	for range 2 {
		if err := e.pub.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if err := c.RunUntilIdle(ctx, 1500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if outcomes[seqboxtype.Applied] != 1 || outcomes[seqboxtype.Duplicate] != 1 {
		t.Fatalf("outcomes %v, want applied 1 and duplicate 1", outcomes)
	}
}
