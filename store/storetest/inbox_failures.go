package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// exerciseFailures covers handler failures: retry, dead letter, redrive,
// panic.
func exerciseFailures(t *testing.T, open Factory) {
	t.Run("TransientThenApplied", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		var calls atomic.Int32
		c := b.consumer(func(c *seqbox.Config) {
			c.Handler = scriptedHandler(inboxConsumer, &calls, errors.New("crm timeout"))
		})
		raw := simple(t, "evt-1")
		res := deliver(t, c, raw, 1)
		require.Equal(t, seqboxtype.Retry, res.Outcome)
		require.Contains(t, res.Reason, "crm timeout")
		require.False(t, res.Outcome.Acks(), "a retry is nacked, not acked")
		require.Equal(t, 0, b.effectCount(""))
		require.Equal(t, int64(0), b.counts().InboxRows, "a retry does not keep the identity")
		require.Empty(t, b.deadLetters(true))
		audit := b.audit("")
		require.Equal(t, []string{"retry"}, auditOutcomes(audit))

		res = deliver(t, c, raw, 2)
		require.Equal(t, seqboxtype.Applied, res.Outcome, res.Reason)
		require.Equal(t, int32(2), calls.Load())
		require.Equal(t, 1, b.effectCount(""))
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts())
		require.Equal(t, seqboxtype.Duplicate, deliver(t, c, raw, 3).Outcome)
		require.Equal(t, 1, b.effectCount(""))
	})

	t.Run("PermanentIsDeadLettered", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer()
		// Odd whitespace and key order: the DLQ must keep the bytes.
		raw := []byte("{ \"type\":\"task.create\",\n\t\"id\" : \"evt-13\", \"source\":\"crm\",  \"data\":{\"fail\":\"permanent\", \"x\":1.50}}")
		res := deliver(t, c, raw, 1)
		require.Equal(t, seqboxtype.DeadLettered, res.Outcome)
		require.Contains(t, res.Reason, "permanent")
		require.Equal(t, 0, b.effectCount(""))
		require.Equal(t, store.Counts{InboxRows: 1, DeadLetters: 1}, b.counts())
		require.Equal(t, "dead_lettered", b.inboxOutcome("crm", "evt-13"))

		letters := b.deadLetters(false)
		require.Len(t, letters, 1)
		letter := letters[0]
		require.Equal(t, raw, letter.Envelope, "the DLQ holds the original envelope byte for byte")
		require.Equal(t, "crm", letter.Source)
		require.Equal(t, "evt-13", letter.ID)
		require.Contains(t, letter.Reason, "permanent")
		require.Equal(t, 1, letter.Attempts)
		require.Contains(t, letter.FirstError, "data.fail=permanent")
		require.Contains(t, letter.LastError, "data.fail=permanent")
		require.Empty(t, letter.Resolution)
		require.False(t, letter.DeadAt.IsZero())
		ev, err := seqboxtype.ParseEvent(raw)
		require.NoError(t, err)
		require.Equal(t, ev.Hash, letter.PayloadHash)
		require.Equal(t, []string{"dead_lettered"}, auditOutcomes(b.audit("")))

		// The identity stays recorded: a redelivery is a duplicate and does
		// not add a second DLQ copy.
		require.Equal(t, seqboxtype.Duplicate, deliver(t, c, raw, 2).Outcome)
		require.Len(t, b.deadLetters(true), 1)
	})

	t.Run("FirstAndLastError", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		var calls atomic.Int32
		c := b.consumer(func(c *seqbox.Config) {
			c.Handler = scriptedHandler(inboxConsumer, &calls, errors.New("first: timeout"),
				seqbox.Permanent(errors.New("second: schema mismatch")))
		})
		raw := simple(t, "evt-1")
		require.Equal(t, seqboxtype.Retry, deliver(t, c, raw, 1).Outcome)
		res := deliver(t, c, raw, 2)
		require.Equal(t, seqboxtype.DeadLettered, res.Outcome)
		letters := b.deadLetters(false)
		require.Len(t, letters, 1)
		require.Equal(t, raw, letters[0].Envelope)
		require.Equal(t, 2, letters[0].Attempts)
		require.Contains(t, letters[0].FirstError, "first: timeout")
		require.Contains(t, letters[0].LastError, "second: schema mismatch")
		require.Contains(t, letters[0].Reason, "permanent")
		require.Equal(t, 0, b.effectCount(""))
	})

	t.Run("AttemptsExhausted", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		var calls atomic.Int32
		c := b.consumer(func(c *seqbox.Config) {
			c.Handler = scriptedHandler(inboxConsumer, &calls, errors.New("down #1"), errors.New("down #2"), errors.New("down #3"))
		})
		raw := simple(t, "evt-1")
		for attempt := 1; attempt <= 2; attempt++ {
			res := deliver(t, c, raw, attempt)
			require.Equal(t, seqboxtype.Retry, res.Outcome, "attempt %d", attempt)
		}
		res := deliver(t, c, raw, 3)
		require.Equal(t, seqboxtype.DeadLettered, res.Outcome)
		require.Contains(t, res.Reason, "attempts exhausted")
		require.Equal(t, 0, b.effectCount(""))
		require.Equal(t, store.Counts{InboxRows: 1, DeadLetters: 1}, b.counts())

		letters := b.deadLetters(false)
		require.Len(t, letters, 1)
		require.Equal(t, raw, letters[0].Envelope)
		require.Equal(t, 3, letters[0].Attempts)
		require.Contains(t, letters[0].Reason, "attempts exhausted")
		require.Contains(t, letters[0].FirstError, "down #1")
		require.Contains(t, letters[0].LastError, "down #3")
		require.Equal(t, []string{"retry", "retry", "dead_lettered"}, auditOutcomes(b.audit("")))
	})

	t.Run("RedriveKeepsIdentity", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		ctx := context.Background()
		var broken atomic.Bool
		broken.Store(true)
		record := replay.RecordHandler(inboxConsumer)
		c := b.consumer(func(c *seqbox.Config) {
			c.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
				if broken.Load() {
					return seqbox.Permanent(errors.New("handler bug"))
				}
				return record(ctx, tx, ev)
			}
		})
		raw := simple(t, "evt-1")
		require.Equal(t, seqboxtype.DeadLettered, deliver(t, c, raw, 1).Outcome)
		letters := b.deadLetters(false)
		require.Len(t, letters, 1)

		// Redriving while still broken fails again and keeps it in the DLQ.
		results, err := c.Redrive(ctx, letters[0].Seq)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.DeadLettered, results[0].Outcome)
		require.Equal(t, 0, b.effectCount(""))
		still := b.deadLetters(false)
		require.Len(t, still, 1, "the failed redrive leaves one open DLQ row")
		require.Equal(t, raw, still[0].Envelope)

		// Fixed: the redrive applies under the original identity.
		broken.Store(false)
		results, err = c.Redrive(ctx, still[0].Seq)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.Applied, results[0].Outcome, results[0].Reason)
		require.Equal(t, "evt-1", results[0].ID)
		require.Equal(t, "crm", results[0].Source)
		require.Equal(t, 1, b.effectCount("evt-1"))
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts())
		require.Equal(t, "applied", b.inboxOutcome("crm", "evt-1"))
		require.Empty(t, b.deadLetters(false), "the DLQ row is resolved")
		all := b.deadLetters(true)
		require.NotEmpty(t, all)
		require.Equal(t, "redriven", all[len(all)-1].Resolution)
		require.NotNil(t, all[len(all)-1].ResolvedAt)

		// Another consumer cannot redrive this consumer's DLQ.
		other := b.consumer(func(c *seqbox.Config) { c.Name, c.Handler = "other", replay.RecordHandler("other") })
		_, err = other.Redrive(ctx, still[0].Seq)
		require.ErrorIs(t, err, store.ErrNotFound)

		// Redriving again, or the broker redelivering the original, applies
		// nothing more.
		_, err = c.Redrive(ctx, still[0].Seq)
		require.ErrorIs(t, err, seqbox.ErrNotBlocking)
		_, err = c.Redrive(ctx, letters[0].Seq)
		require.ErrorIs(t, err, seqbox.ErrNotBlocking)
		require.Equal(t, seqboxtype.Duplicate, deliver(t, c, raw, 2).Outcome)
		require.Equal(t, seqboxtype.Duplicate, deliver(t, b.consumer(), raw, 3).Outcome)
		require.Equal(t, 1, b.effectCount(""))
		require.Equal(t, int64(1), b.counts().InboxRows)
	})

	// An operator redrives the same DLQ row twice at once (two terminals,
	// or a retried HTTP call): one applies, the other finds it done.
	t.Run("ConcurrentRedrive", func(t *testing.T) {
		t.Parallel()
		watch := newWaitWatch("", 2) // both redrives reach the identity's row
		b := setupInbox(t, watch.wrap(open))
		ctx := context.Background()
		var broken atomic.Bool
		broken.Store(true)
		record := replay.RecordHandler(inboxConsumer)
		handler := func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			if broken.Load() {
				return seqbox.Permanent(errors.New("handler bug"))
			}
			// Hold the redrive open until the other waits for it.
			if err := watch.wait(); err != nil {
				return err
			}
			return record(ctx, tx, ev)
		}
		c := b.consumer(func(c *seqbox.Config) { c.Handler = handler })
		raw := simple(t, "evt-1")
		require.Equal(t, seqboxtype.DeadLettered, deliver(t, c, raw, 1).Outcome)
		seq := b.deadLetters(false)[0].Seq
		broken.Store(false)

		start := make(chan struct{})
		var wg sync.WaitGroup
		outcomes := make([]seqboxtype.Outcome, 2)
		errs := make([]error, 2)
		for i := range 2 {
			rc := b.consumer(func(c *seqbox.Config) { c.Handler = handler })
			wg.Go(func() {
				<-start
				results, err := rc.Redrive(ctx, seq)
				errs[i] = err
				if err == nil {
					outcomes[i] = results[0].Outcome
				}
			})
		}
		watch.armed.Store(true)
		close(start)
		wg.Wait()
		applied := 0
		for i := range 2 {
			switch {
			case errs[i] != nil:
				require.ErrorIs(t, errs[i], seqbox.ErrNotBlocking, "the loser sees the row already resolved")
			case outcomes[i] == seqboxtype.Applied:
				applied++
			default:
				require.Equal(t, seqboxtype.Duplicate, outcomes[i])
			}
		}
		require.Equal(t, 1, applied)
		require.Equal(t, 1, b.effectCount(""))
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts())
		require.Empty(t, b.deadLetters(false))
	})

	t.Run("HandlerPanicIsDeadLettered", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer(func(c *seqbox.Config) {
			c.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO seqbox_record_effects (consumer, n, source, id, partitionkey, type)
					VALUES ($1, 1, $2, $3, '', $4)`, inboxConsumer, ev.Source, ev.ID, ev.Type); err != nil {
					return err
				}
				panic("nil map in the agent's tool call")
			}
		})
		raw := simple(t, "poison")
		results, err := c.Deliver(context.Background(), raw, 1)
		require.NoError(t, err, "a panic is an outcome, not a crash")
		require.Equal(t, seqboxtype.DeadLettered, results[0].Outcome)
		require.Equal(t, 0, b.effectCount(""), "the panicking handler's write is rolled back")
		require.Equal(t, store.Counts{InboxRows: 1, DeadLetters: 1}, b.counts())
		letters := b.deadLetters(false)
		require.Len(t, letters, 1)
		require.Equal(t, raw, letters[0].Envelope)
		require.Contains(t, letters[0].LastError, "panic")
		require.Contains(t, letters[0].LastError, "nil map in the agent's tool call")
		require.Equal(t, 1, letters[0].Attempts)

		// The consumer keeps working.
		require.Equal(t, seqboxtype.Applied, deliver(t, b.consumer(), simple(t, "healthy"), 1).Outcome)
		require.Equal(t, 1, b.effectCount("healthy"))
	})
}

// exerciseRejected: an invalid envelope is rejected with a reason naming
// the field, kept byte for byte in the DLQ, and nothing else is written.
func exerciseRejected(t *testing.T, open Factory) {
	tests := []struct {
		name, raw string
		field     string // how the reason names the offending field
		id        string // the identity the DLQ row can still name
	}{
		{"MissingID", `{"source":"crm","type":"t"}`, "id: ", ""},
		{"EmptyID", `{"id":"","source":"crm","type":"t"}`, "id: ", ""},
		{"MissingSource", `{"id":"evt-1","type":"t"}`, "source: ", "evt-1"},
		{"MissingType", `{"id":"evt-1","source":"crm"}`, "type: ", "evt-1"},
		{"BadJSON", `{"id":"evt-1","source":"crm",`, "JSON", ""},
		{"NonIntegerVersion", `{"id":"evt-1","source":"crm","type":"t","partitionkey":"k","objectversion":"seven"}`, "objectversion: ", "evt-1"},
		{"FractionalVersion", `{"id":"evt-1","source":"crm","type":"t","partitionkey":"k","objectversion":2.5}`, "objectversion: ", "evt-1"},
		{"NegativeVersion", `{"id":"evt-1","source":"crm","type":"t","partitionkey":"k","objectversion":-3}`, "objectversion: ", "evt-1"},
		{"VersionWithoutKey", `{"id":"evt-1","source":"crm","type":"t","objectversion":3}`, "objectversion: ", "evt-1"},
		{"Oversized", `{"id":"evt-1","source":"crm","type":"t","data":"` + strings.Repeat("x", seqboxtype.MaxEventSize) + `"}`, "limit", "evt-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupInbox(t, open)
			c := b.consumer()
			raw := []byte(tt.raw)
			results, err := c.Deliver(context.Background(), raw, 1)
			require.NoError(t, err, "a bad envelope is an outcome, not an error")
			require.Len(t, results, 1)
			res := results[0]
			require.Equal(t, seqboxtype.Rejected, res.Outcome)
			require.Contains(t, res.Reason, tt.field, "the reason names the field")
			require.True(t, res.Outcome.Acks())

			require.Equal(t, 0, b.effectCount(""))
			counts := b.counts()
			require.Equal(t, store.Counts{DeadLetters: 1}, counts, "only the DLQ row is written")
			letters := b.deadLetters(false)
			require.Len(t, letters, 1)
			require.Equal(t, raw, letters[0].Envelope, "the DLQ keeps the bytes as received")
			require.Contains(t, letters[0].Reason, "rejected")
			require.Contains(t, letters[0].Reason, tt.field)
			require.Equal(t, tt.id, letters[0].ID)
			audit := b.audit("")
			require.Equal(t, []string{"rejected"}, auditOutcomes(audit))
			require.Contains(t, audit[0].Reason, tt.field)
			parked, err := b.st.Executor().ParkedList(context.Background(), store.KeyRef{Consumer: b.cfg.Name, Key: ""})
			require.NoError(t, err)
			require.Empty(t, parked)
			keys, err := b.st.Executor().KeyViewList(context.Background(), store.KeyViewListParams{Consumer: b.cfg.Name, Stuck: false})
			require.NoError(t, err)
			require.Empty(t, keys, "a rejected event does not touch ordering state")
		})
	}
}

// exerciseRedriveRejected: redriving a rejected envelope rejects it again;
// the DLQ must not grow a second open copy of the same message each time.
func exerciseRedriveRejected(t *testing.T, open Factory) {
	for name, raw := range map[string][]byte{
		"WithIdentity":    []byte(`{"id":"evt-1","source":"crm","type":"t","partitionkey":"k","objectversion":-3}`),
		"WithoutIdentity": []byte(`{"source":"crm","type":"t"}`),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupInbox(t, open)
			c := b.consumer()
			require.Equal(t, seqboxtype.Rejected, deliver(t, c, raw, 1).Outcome)
			letters := b.deadLetters(false)
			require.Len(t, letters, 1)

			results, err := c.Redrive(context.Background(), letters[0].Seq)
			require.NoError(t, err)
			require.Equal(t, seqboxtype.Rejected, results[0].Outcome)
			open := b.deadLetters(false)
			require.Len(t, open, 1, "one open DLQ row per rejected message, however often it is redriven")
			require.Equal(t, raw, open[0].Envelope)
			require.Equal(t, letters[0].Seq, open[0].Seq, "a dead letter keeps its number across redrives")
			require.Equal(t, 1, open[0].Redrives)
			require.Equal(t, int64(1), b.counts().DeadLetters)
			require.Equal(t, 0, b.effectCount(""))
			require.Equal(t, int64(0), b.counts().InboxRows)
		})
	}
}

// exerciseRedriveOneWithoutIdentity: envelopes rejected for lacking an id
// share the empty identity; redriving one of them must resolve that one
// DLQ row only, not every other identity-less row of the consumer.
func exerciseRedriveOneWithoutIdentity(t *testing.T, open Factory) {
	t.Parallel()
	b := setupInbox(t, open)
	c := b.consumer()
	first := []byte(`{"source":"crm","type":"order.placed"}`)
	second := []byte(`{"source":"crm","type":"order.cancelled"}`)
	require.Equal(t, seqboxtype.Rejected, deliver(t, c, first, 1).Outcome)
	require.Equal(t, seqboxtype.Rejected, deliver(t, c, second, 1).Outcome)
	letters := b.deadLetters(false)
	require.Len(t, letters, 2)
	require.Equal(t, first, letters[0].Envelope)

	results, err := c.Redrive(context.Background(), letters[0].Seq)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Rejected, results[0].Outcome)
	var bodies []string
	for _, letter := range b.deadLetters(false) {
		bodies = append(bodies, string(letter.Envelope))
	}
	require.Contains(t, bodies, string(second), "the row that was not redriven stays open")
	require.Len(t, bodies, 2, "the redriven envelope is rejected again; the other is still waiting")
	after := b.deadLetters(false)
	require.Equal(t, []int64{letters[0].Seq, letters[1].Seq}, []int64{after[0].Seq, after[1].Seq},
		"the redriven row keeps its number; the other is untouched")
	require.Equal(t, []int{1, 0}, []int{after[0].Redrives, after[1].Redrives})
}
