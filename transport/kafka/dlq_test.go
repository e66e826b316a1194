package kafka_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// TestDeadLetterAfterMaxAttempts: a handler that always fails is retried
// (the transport redelivers each nack from the member) until seqbox's
// Retry.MaxAttempts, then the message is in seqbox's DLQ with its identity
// and body unchanged, its offset is committed, and Kafka does not deliver
// it again. Kafka has no delivery limit of its own: MaxAttempts alone
// decides.
func TestDeadLetterAfterMaxAttempts(t *testing.T) {
	r := newRig(t, 2)
	body := event("poison-1", 1)
	if err := r.publisher(t).Publish(context.Background(), body); err != nil {
		t.Fatalf("publish: %v", err)
	}
	fx := newEffects(t)
	var calls atomic.Int64
	const maxAttempts = 3
	tr := r.open(t, "dlq")
	stop := running(t, fx.consumer(t, tr, func(cfg *seqbox.Config) {
		cfg.Retry = seqbox.RetryPolicy{MaxAttempts: maxAttempts, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
		cfg.Handler = func(context.Context, seqbox.Tx, seqboxtype.Event) error {
			calls.Add(1)
			return errors.New("the CRM is down")
		}
	}))
	waitfor.That(t, 30*time.Second, "the message dead-lettered", func() bool { return fx.outcome(seqboxtype.DeadLettered) > 0 })
	// The ack after the DLQ insert commits the offset past the record:
	// from then on it cannot come back.
	r.waitCommitted(t, "dlq", 30*time.Second)
	stop()
	if fx.outcome(seqboxtype.DeadLettered) != 1 {
		t.Fatalf("dead-lettered %d times, want once", fx.outcome(seqboxtype.DeadLettered))
	}
	if n := calls.Load(); n != maxAttempts {
		t.Fatalf("handler called %d times, want %d", n, maxAttempts)
	}
	letters, err := fx.Store().Executor().DeadLetterList(context.Background(), store.DeadLetterListParams{Consumer: "kafkatest", All: false})
	if err != nil {
		t.Fatalf("list DLQ: %v", err)
	}
	if len(letters) != 1 {
		t.Fatalf("DLQ holds %d rows, want 1", len(letters))
	}
	if letters[0].ID != "poison-1-v1" || letters[0].Source != "kafkatest" || !bytes.Equal(letters[0].Envelope, body) {
		t.Fatalf("DLQ row %s/%s %s, want kafkatest/poison-1-v1 with the published body %s", letters[0].Source, letters[0].ID, letters[0].Envelope, body)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	quietFor(t, r.open(t, "dlq"), 2*time.Second)
}
