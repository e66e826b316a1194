package storetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
	"github.com/stretchr/testify/require"
)

// inboxBundle is one fresh store with the record handler's business tables
// and the consumer configuration the inbox tests start from. The record
// handler's record_effects rows are the business effects.
type inboxBundle struct {
	st  store.Store
	cfg seqbox.Config
}

const inboxConsumer = "inbox"

func setupInbox(t *testing.T, open Factory) *inboxBundle {
	t.Helper()
	st := open(t)
	require.NoError(t, replay.EnsureRecordTables(context.Background(), st.DB()))
	return &inboxBundle{st: st, cfg: seqbox.Config{
		Name: inboxConsumer, Store: st, Handler: replay.RecordHandler(inboxConsumer),
		Retry: seqbox.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond},
	}}
}

// consumer builds a consumer from the bundle's config after applying the
// changes given; the bundle's config itself is left alone.
func (b *inboxBundle) consumer(t *testing.T, changes ...func(*seqbox.Config)) *seqbox.Consumer {
	t.Helper()
	cfg := b.cfg
	for _, ch := range changes {
		ch(&cfg)
	}
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(t, err)
	return c
}

// deliver delivers raw and returns the message's own decision (the first).
func deliver(t *testing.T, c *seqbox.Consumer, raw []byte, attempt int) seqbox.Decision {
	t.Helper()
	ds, err := c.Deliver(context.Background(), raw, attempt)
	require.NoError(t, err)
	require.NotEmpty(t, ds)
	return ds[0]
}

// effects counts the business effects of the bundle's consumer, of one
// identity when id is not empty.
func (b *inboxBundle) effects(t *testing.T, id string) int {
	t.Helper()
	return countEffects(t, b.st, b.cfg.Name, id)
}

func countEffects(t *testing.T, st store.Store, consumer, id string) int {
	t.Helper()
	var n int
	var err error
	if id == "" {
		err = st.DB().QueryRow(`SELECT COUNT(*) FROM record_effects WHERE consumer = $1`, consumer).Scan(&n)
	} else {
		err = st.DB().QueryRow(`SELECT COUNT(*) FROM record_effects WHERE consumer = $1 AND id = $2`, consumer, id).Scan(&n)
	}
	require.NoError(t, err)
	return n
}

func (b *inboxBundle) counts(t *testing.T) store.Counts {
	t.Helper()
	c, err := b.st.Operator().Counts(context.Background(), b.cfg.Name)
	require.NoError(t, err)
	return c
}

// inboxOutcome reads the outcome recorded for an identity straight from
// the inbox table ("" when the identity is not recorded).
func (b *inboxBundle) inboxOutcome(t *testing.T, source, id string) string {
	t.Helper()
	var out string
	err := b.st.DB().QueryRow(`SELECT outcome FROM seqbox_inbox WHERE consumer = $1 AND source = $2 AND id = $3`,
		b.cfg.Name, source, id).Scan(&out)
	if errors.Is(err, sql.ErrNoRows) {
		return ""
	}
	require.NoError(t, err)
	return out
}

// audit lists the consumer's audit rows, oldest first.
func (b *inboxBundle) audit(t *testing.T) []store.AuditRow {
	t.Helper()
	rows, err := b.st.Operator().Audit(context.Background(), b.cfg.Name, "", 1000)
	require.NoError(t, err)
	return rows
}

func auditOutcomes(rows []store.AuditRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Outcome
	}
	return out
}

// dlq lists the consumer's DLQ, resolved rows too when all is set.
func (b *inboxBundle) dlq(t *testing.T, all bool) []store.DeadLetter {
	t.Helper()
	dls, err := b.st.Operator().DeadLetters(context.Background(), b.cfg.Name, all)
	require.NoError(t, err)
	return dls
}

// event builds a structured-mode envelope from attributes.
func event(t *testing.T, attrs map[string]any) []byte {
	t.Helper()
	raw, err := json.Marshal(attrs)
	require.NoError(t, err)
	return raw
}

func simple(t *testing.T, id string) []byte {
	t.Helper()
	return event(t, map[string]any{"specversion": "1.0", "id": id, "source": "crm", "type": "task.create",
		"data": map[string]any{"task": "follow up " + id}})
}

// crashAt returns fault hooks that crash at point p, every time it is
// reached, and count how often that was.
func crashAt(p seqbox.FaultPoint, hits *atomic.Int32) func(seqbox.FaultPoint) error {
	return func(q seqbox.FaultPoint) error {
		if q != p {
			return nil
		}
		if hits != nil {
			hits.Add(1)
		}
		return fmt.Errorf("at %s: %w", q, seqbox.ErrCrash)
	}
}

// scriptedHandler wraps the record handler: call n (from 1) fails with
// errs[n-1] when that is not nil; calls past the script apply.
func scriptedHandler(name string, calls *atomic.Int32, errs ...error) seqbox.Handler {
	record := replay.RecordHandler(name)
	return func(ctx context.Context, tx seqbox.Tx, ev seqbox.Event) error {
		n := int(calls.Add(1))
		if n <= len(errs) && errs[n-1] != nil {
			return errs[n-1]
		}
		return record(ctx, tx, ev)
	}
}

func exerciseInbox(t *testing.T, open Factory) {
	t.Run("FailureWindows", func(t *testing.T) { exerciseFailureWindows(t, open) })
	t.Run("Identity", func(t *testing.T) { exerciseIdentity(t, open) })
	t.Run("Retention", func(t *testing.T) { exerciseRetention(t, open) })
	t.Run("Failures", func(t *testing.T) { exerciseFailures(t, open) })
	t.Run("Rejected", func(t *testing.T) { exerciseRejected(t, open) })
	t.Run("RedriveRejected", func(t *testing.T) { exerciseRedriveRejected(t, open) })
	t.Run("RedriveOneWithoutIdentity", func(t *testing.T) { exerciseRedriveOneWithoutIdentity(t, open) })
	t.Run("Concurrency", func(t *testing.T) { exerciseConcurrency(t, open) })
}

// exerciseFailureWindows interrupts the consumer at each window of the seed
// ("Teste as janelas de falha"): whatever the window, the message is either
// wholly applied or not at all, and the redelivery leaves exactly one
// effect.
func exerciseFailureWindows(t *testing.T, open Factory) {
	// A crash inside the transaction (or before it) leaves nothing behind:
	// the redelivery applies the message, once.
	for _, p := range []seqbox.FaultPoint{
		seqbox.FaultBeforeTx, seqbox.FaultAfterInboxInsert, seqbox.FaultAfterHandler, seqbox.FaultBeforeCommit,
	} {
		t.Run("CrashAt_"+string(p), func(t *testing.T) {
			t.Parallel()
			b := setupInbox(t, open)
			ctx := context.Background()
			raw := simple(t, "evt-1")

			var hits atomic.Int32
			crashing := b.consumer(t, func(c *seqbox.Config) { c.Faults = crashAt(p, &hits) })
			ds, err := crashing.Deliver(ctx, raw, 1)
			require.ErrorIs(t, err, seqbox.ErrCrash)
			require.True(t, seqbox.IsInjected(err))
			require.Nil(t, ds)
			require.Equal(t, int32(1), hits.Load(), "the fault point is reached exactly once")

			require.Equal(t, int64(0), b.counts(t).InboxRows, "the identity was rolled back with the crash")
			require.Equal(t, 0, b.effects(t, ""), "the effect was rolled back with the crash")
			require.Empty(t, b.audit(t), "no decision was recorded")
			require.Empty(t, b.dlq(t, true))

			// The broker redelivers to a restarted consumer.
			restarted := b.consumer(t)
			d := deliver(t, restarted, raw, 2)
			require.Equal(t, seqbox.Applied, d.Outcome, d.Reason)
			require.Equal(t, 1, b.effects(t, "evt-1"))
			require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts(t))
			require.Equal(t, "applied", b.inboxOutcome(t, "crm", "evt-1"))

			// And any later copy is a duplicate.
			d = deliver(t, restarted, raw, 3)
			require.Equal(t, seqbox.Duplicate, d.Outcome)
			require.Equal(t, 1, b.effects(t, ""))
			require.Equal(t, []string{"duplicate"}, auditOutcomes(b.audit(t)))
		})
	}

	// Committed, then the process died before the ACK: the broker
	// redelivers and the inbox absorbs it.
	t.Run("CrashAfterCommitBeforeAck", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer(t)
		raw := simple(t, "evt-1")
		d := deliver(t, c, raw, 1)
		require.Equal(t, seqbox.Applied, d.Outcome, d.Reason)
		// (no ack) — the redelivery reaches a restarted consumer.
		d = deliver(t, b.consumer(t), raw, 2)
		require.Equal(t, seqbox.Duplicate, d.Outcome)
		require.Contains(t, d.Reason, "applied", "the duplicate names what the identity ended in")
		require.Equal(t, 1, b.effects(t, ""))
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts(t))
		audit := b.audit(t)
		require.Equal(t, []string{"duplicate"}, auditOutcomes(audit))
		require.Equal(t, "evt-1", audit[0].ID)
		require.Equal(t, "crm", audit[0].Source)
	})

	// A crash in the middle of a batch rolls back every delivery of the
	// batch, the ones before the crash too, and acknowledges none.
	t.Run("CrashMidBatch", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		exerciseMidBatchCrash(t, b)
	})
}

func exerciseMidBatchCrash(t *testing.T, b *inboxBundle) {
	ctx := context.Background()
	ft := &fakeTransport{release: make(chan struct{}), gate: make(chan struct{})}
	first := ft.delivery(simple(t, "first"))
	batch := []*fakeDelivery{
		ft.delivery(simple(t, "m1")), ft.delivery(simple(t, "m2")), ft.delivery(simple(t, "m3")), ft.delivery(simple(t, "m4")),
	}
	ft.script = [][]*fakeDelivery{{first}, batch}

	var midBatch, beforeTx atomic.Int32
	c := b.consumer(t, func(c *seqbox.Config) {
		c.Transport = ft
		c.Workers, c.BatchSize = 1, 8
		c.Faults = func(p seqbox.FaultPoint) error {
			switch p {
			case seqbox.FaultBeforeTx:
				// Hold the first batch (alone in it: the transport hands
				// out the four others only now) until the four others
				// have been received, so that they form one batch of four.
				if beforeTx.Add(1) == 1 {
					close(ft.gate)
					select {
					case <-ft.release:
					case <-time.After(10 * time.Second):
						return errors.New("storetest: the second receive never came")
					}
				}
			case seqbox.FaultMidBatch:
				midBatch.Add(1)
				return seqbox.ErrCrash
			}
			return nil
		}
	})
	runCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := c.Run(runCtx)
	require.ErrorIs(t, err, seqbox.ErrCrash, "Run stops at the injected crash")
	require.Equal(t, int32(1), midBatch.Load())

	require.Equal(t, 1, b.effects(t, ""), "only the batch before the crash applied")
	require.Equal(t, 1, b.effects(t, "first"))
	require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts(t), "m1 and m2 ran before the crash and were rolled back")
	require.Empty(t, b.audit(t))
	require.Equal(t, []string{"first"}, ft.acked(), "nothing of the crashed batch is acknowledged")
	require.Empty(t, ft.nacked(), "a crash settles nothing")

	// The broker redelivers the four to a restarted consumer.
	restarted := b.consumer(t)
	for _, d := range batch {
		got := deliver(t, restarted, d.body, 2)
		require.Equal(t, seqbox.Applied, got.Outcome, got.Reason)
	}
	require.Equal(t, 5, b.effects(t, ""))
	for _, id := range []string{"first", "m1", "m2", "m3", "m4"} {
		require.Equal(t, 1, b.effects(t, id), id)
	}
	require.Equal(t, store.Counts{InboxRows: 5, Applied: 5}, b.counts(t))
}

// exerciseIdentity covers what the inbox decides from identity and hash:
// duplicate, collision, semantic duplicate, consumers kept apart.
func exerciseIdentity(t *testing.T, open Factory) {
	t.Run("Collision", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer(t)
		first := []byte(`{"id":"evt-482","source":"erp","type":"stock.reserved","data":{"qty":10}}`)
		second := []byte(`{"id":"evt-482","source":"erp","type":"stock.reserved","data":{"qty":12}}`)
		require.Equal(t, seqbox.Applied, deliver(t, c, first, 1).Outcome)

		d := deliver(t, c, second, 1)
		require.Equal(t, seqbox.Collision, d.Outcome)
		require.Contains(t, d.Reason, "hash")
		require.Equal(t, 1, b.effects(t, ""), "the second payload applies nothing")
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1, Parked: 1}, b.counts(t))
		require.Equal(t, "applied", b.inboxOutcome(t, "erp", "evt-482"), "the recorded identity is not overwritten")

		parked, err := b.st.Operator().Parked(context.Background(), b.cfg.Name, "")
		require.NoError(t, err)
		require.Len(t, parked, 1)
		require.Equal(t, store.ParkCollision, parked[0].Reason)
		require.Equal(t, "collision", parked[0].Reason)
		require.Equal(t, "evt-482", parked[0].ID)
		require.Equal(t, second, parked[0].Envelope, "the second payload is kept for investigation, byte for byte")
		ev2, err := seqbox.ParseEvent(second)
		require.NoError(t, err)
		require.Equal(t, ev2.Hash, parked[0].PayloadHash)

		audit := b.audit(t)
		require.Equal(t, []string{"collision"}, auditOutcomes(audit))
		require.NotEmpty(t, audit[0].NextAction)

		// The original payload is still a plain duplicate.
		require.Equal(t, seqbox.Duplicate, deliver(t, c, first, 2).Outcome)
		require.Equal(t, 1, b.effects(t, ""))
	})

	t.Run("RepublishedWithNewPublishedAt", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer(t)
		first := []byte(`{"id":"evt-9","source":"crm","type":"task.create","publishedat":"2026-10-09T12:00:00Z","data":{"a":1}}`)
		// Same fact, republished later, with reordered keys and a trace.
		again := []byte(`{"data": {"a": 1}, "type": "task.create", "source": "crm", "id": "evt-9",
			"publishedat": "2026-10-09T12:05:00Z", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`)
		require.Equal(t, seqbox.Applied, deliver(t, c, first, 1).Outcome)
		d := deliver(t, c, again, 1)
		require.Equal(t, seqbox.Duplicate, d.Outcome, "publishedat and traceparent are volatile: %s", d.Reason)
		require.Equal(t, 1, b.effects(t, ""))
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts(t))
		require.Equal(t, []string{"duplicate"}, auditOutcomes(b.audit(t)))
	})

	// DESIGN §1: the hash leaves out publishedat, traceparent, tracestate,
	// delivery metadata "plus any the consumer configures". Configuring an
	// extra volatile attribute must not make publishedat significant again.
	t.Run("ConsumerVolatileAttributesAddToDefaults", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer(t, func(c *seqbox.Config) { c.VolatileAttributes = []string{"relayhop"} })
		first := []byte(`{"id":"evt-9","source":"crm","type":"t","relayhop":"a","publishedat":"2026-10-09T12:00:00Z"}`)
		hop := []byte(`{"id":"evt-9","source":"crm","type":"t","relayhop":"b","publishedat":"2026-10-09T12:00:00Z"}`)
		republished := []byte(`{"id":"evt-9","source":"crm","type":"t","relayhop":"a","publishedat":"2026-10-09T12:07:00Z"}`)
		require.Equal(t, seqbox.Applied, deliver(t, c, first, 1).Outcome)
		d := deliver(t, c, hop, 1)
		require.Equal(t, seqbox.Duplicate, d.Outcome, "the configured attribute is volatile: %s", d.Reason)
		d = deliver(t, c, republished, 1)
		require.Equal(t, seqbox.Duplicate, d.Outcome, "publishedat stays volatile when the consumer adds its own: %s", d.Reason)
		require.Equal(t, 1, b.effects(t, ""))
		require.Equal(t, int64(0), b.counts(t).Parked, "nothing parked as a collision")
	})

	t.Run("SemanticDuplicate", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer(t)
		key := "criar_tarefa_followup:oportunidade_2481:reuniao_184"
		first := event(t, map[string]any{"id": "evt-1", "source": "crm", "type": "meeting.held", "businesskey": key})
		other := event(t, map[string]any{"id": "evt-2", "source": "crm", "type": "meeting.held", "businesskey": key})
		require.Equal(t, seqbox.Applied, deliver(t, c, first, 1).Outcome)

		d := deliver(t, c, other, 1)
		require.Equal(t, seqbox.SemanticDuplicate, d.Outcome)
		require.Contains(t, d.Reason, key)
		require.Equal(t, 1, b.effects(t, ""), "the same effect is not applied twice under a new id")
		require.Equal(t, 0, b.effects(t, "evt-2"))
		require.Equal(t, store.Counts{InboxRows: 2, Applied: 1}, b.counts(t), "the new identity is recorded, not applied")
		require.Equal(t, "semantic_duplicate", b.inboxOutcome(t, "crm", "evt-2"))
		audit := b.audit(t)
		require.Equal(t, []string{"semantic_duplicate"}, auditOutcomes(audit))
		require.Equal(t, "evt-2", audit[0].ID)

		// Its redelivery is a plain duplicate; a different business key is
		// new work.
		require.Equal(t, seqbox.Duplicate, deliver(t, c, other, 2).Outcome)
		third := event(t, map[string]any{"id": "evt-3", "source": "crm", "type": "meeting.held", "businesskey": key + ":v2"})
		require.Equal(t, seqbox.Applied, deliver(t, c, third, 1).Outcome)
		require.Equal(t, 2, b.effects(t, ""))
	})

	t.Run("SameIDFromAnotherSource", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer(t)
		require.Equal(t, seqbox.Applied, deliver(t, c, []byte(`{"id":"1","source":"crm","type":"t"}`), 1).Outcome)
		require.Equal(t, seqbox.Applied, deliver(t, c, []byte(`{"id":"1","source":"erp","type":"t"}`), 1).Outcome,
			"identity is (source, id)")
		require.Equal(t, 2, b.effects(t, ""))
		require.Equal(t, int64(2), b.counts(t).InboxRows)
	})

	t.Run("IndependentConsumers", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		raw := simple(t, "pedido_confirmado-1")
		names := []string{"estoque", "faturamento", "atendimento"}
		for _, name := range names {
			c := b.consumer(t, func(c *seqbox.Config) { c.Name, c.Handler = name, replay.RecordHandler(name) })
			require.Equal(t, seqbox.Applied, deliver(t, c, raw, 1).Outcome, name)
		}
		for _, name := range names {
			c := b.consumer(t, func(c *seqbox.Config) { c.Name, c.Handler = name, replay.RecordHandler(name) })
			require.Equal(t, seqbox.Duplicate, deliver(t, c, raw, 2).Outcome, name)
			require.Equal(t, 1, countEffects(t, b.st, name, ""), name)
			counts, err := b.st.Operator().Counts(context.Background(), name)
			require.NoError(t, err)
			require.Equal(t, int64(1), counts.InboxRows, name)
			require.Equal(t, int64(1), counts.Applied, name)
		}
		require.Equal(t, int64(0), b.counts(t).InboxRows, "no identity leaks into another consumer")
	})
}

// exerciseRetention shows what retention protects: once an identity is
// purged, a redelivery of it looks new and applies again.
func exerciseRetention(t *testing.T, open Factory) {
	t.Run("RedeliveryAfterPurgeAppliesAgain", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		ctx := context.Background()
		t0 := time.Date(2026, 10, 9, 12, 0, 0, 0, time.UTC)
		now := t0
		c := b.consumer(t, func(c *seqbox.Config) {
			c.Retention = 30 * 24 * time.Hour
			c.DLQRetention, c.RedriveWindow = 14*24*time.Hour, 24*time.Hour
			c.Now = func() time.Time { return now }
		})
		raw := simple(t, "evt-1")
		require.Equal(t, seqbox.Applied, deliver(t, c, raw, 1).Outcome)

		purged, err := b.st.Operator().PurgeInbox(ctx, b.cfg.Name, t0.Add(29*24*time.Hour), 100)
		require.NoError(t, err)
		require.Equal(t, int64(0), purged, "within retention nothing is purged")
		now = t0.Add(29 * 24 * time.Hour)
		require.Equal(t, seqbox.Duplicate, deliver(t, c, raw, 2).Outcome)

		purged, err = b.st.Operator().PurgeInbox(ctx, b.cfg.Name, t0.Add(31*24*time.Hour), 100)
		require.NoError(t, err)
		require.Equal(t, int64(1), purged)
		require.Equal(t, int64(0), b.counts(t).InboxRows)

		// The identity is gone, so this redelivery cannot be recognised and
		// the effect happens a second time. This is exactly why
		// Config.Validate refuses a Retention shorter than the broker's
		// redelivery window or than DLQ retention plus the redrive window:
		// every copy that can still come back must find its identity.
		now = t0.Add(31 * 24 * time.Hour)
		d := deliver(t, c, raw, 3)
		require.Equal(t, seqbox.Applied, d.Outcome)
		require.Equal(t, 2, b.effects(t, "evt-1"))
		require.Equal(t, int64(1), b.counts(t).InboxRows)
	})

	t.Run("PurgeInSmallBatchesPerConsumer", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		ctx := context.Background()
		t0 := time.Date(2026, 10, 9, 12, 0, 0, 0, time.UTC)
		const retention = 30 * 24 * time.Hour
		clock := func(c *seqbox.Config) { c.Now, c.Retention = func() time.Time { return t0 }, retention }
		c := b.consumer(t, clock)
		other := b.consumer(t, clock, func(c *seqbox.Config) { c.Name, c.Handler = "other", replay.RecordHandler("other") })
		for i := range 5 {
			require.Equal(t, seqbox.Applied, deliver(t, c, simple(t, fmt.Sprintf("evt-%d", i)), 1).Outcome)
		}
		require.Equal(t, seqbox.Applied, deliver(t, other, simple(t, "evt-0"), 1).Outcome)

		after := t0.Add(retention + time.Hour)
		var got []int64
		for range 4 {
			n, err := b.st.Operator().PurgeInbox(ctx, b.cfg.Name, after, 2)
			require.NoError(t, err)
			got = append(got, n)
		}
		require.Equal(t, []int64{2, 2, 1, 0}, got, "at most batch rows per call, and the count of what was removed")
		require.Equal(t, int64(0), b.counts(t).InboxRows)
		oc, err := b.st.Operator().Counts(ctx, "other")
		require.NoError(t, err)
		require.Equal(t, int64(1), oc.InboxRows, "purging one consumer leaves the others alone")
		require.Equal(t, 5, b.effects(t, ""), "purging identities never touches business data")
	})

	t.Run("ShortRetentionIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		day := 24 * time.Hour
		// The seed's example: a DLQ kept 30 days and an inbox purged on the
		// 7th day leaves every redrive unprotected.
		short := b.cfg
		short.Transport = &fakeTransport{}
		short.Retention, short.DLQRetention, short.RedriveWindow, short.RedeliveryWindow = 7*day, 30*day, day, 4*day
		err := short.Validate()
		require.ErrorIs(t, err, seqbox.ErrInvalidConfig)
		require.Contains(t, err.Error(), "Retention")
		_, err = seqbox.NewConsumer(short)
		require.ErrorIs(t, err, seqbox.ErrInvalidConfig, "NewConsumer validates too")

		// Retention must also cover the broker's redelivery window.
		short.Retention, short.DLQRetention, short.RedriveWindow, short.RedeliveryWindow = 7*day, 2*day, day, 14*day
		require.ErrorIs(t, short.Validate(), seqbox.ErrInvalidConfig)

		// Exactly covering both is enough.
		short.Retention, short.DLQRetention, short.RedriveWindow, short.RedeliveryWindow = 31*day, 30*day, day, 14*day
		require.NoError(t, short.Validate())
		_, err = seqbox.NewConsumer(short)
		require.NoError(t, err)
	})
}

// exerciseFailures covers handler failures: retry, dead letter, redrive,
// panic.
func exerciseFailures(t *testing.T, open Factory) {
	t.Run("TransientThenApplied", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		var calls atomic.Int32
		c := b.consumer(t, func(c *seqbox.Config) {
			c.Handler = scriptedHandler(inboxConsumer, &calls, errors.New("crm timeout"))
		})
		raw := simple(t, "evt-1")
		d := deliver(t, c, raw, 1)
		require.Equal(t, seqbox.Retry, d.Outcome)
		require.Contains(t, d.Reason, "crm timeout")
		require.False(t, d.Outcome.Acks(), "a retry is nacked, not acked")
		require.Equal(t, 0, b.effects(t, ""))
		require.Equal(t, int64(0), b.counts(t).InboxRows, "a retry does not keep the identity")
		require.Empty(t, b.dlq(t, true))
		audit := b.audit(t)
		require.Equal(t, []string{"retry"}, auditOutcomes(audit))

		d = deliver(t, c, raw, 2)
		require.Equal(t, seqbox.Applied, d.Outcome, d.Reason)
		require.Equal(t, int32(2), calls.Load())
		require.Equal(t, 1, b.effects(t, ""))
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts(t))
		require.Equal(t, seqbox.Duplicate, deliver(t, c, raw, 3).Outcome)
		require.Equal(t, 1, b.effects(t, ""))
	})

	t.Run("PermanentIsDeadLettered", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer(t)
		// Odd whitespace and key order: the DLQ must keep the bytes.
		raw := []byte("{ \"type\":\"task.create\",\n\t\"id\" : \"evt-13\", \"source\":\"crm\",  \"data\":{\"fail\":\"permanent\", \"x\":1.50}}")
		d := deliver(t, c, raw, 1)
		require.Equal(t, seqbox.DeadLettered, d.Outcome)
		require.Contains(t, d.Reason, "permanent")
		require.Equal(t, 0, b.effects(t, ""))
		require.Equal(t, store.Counts{InboxRows: 1, DeadLetters: 1}, b.counts(t))
		require.Equal(t, "dead_lettered", b.inboxOutcome(t, "crm", "evt-13"))

		dls := b.dlq(t, false)
		require.Len(t, dls, 1)
		dl := dls[0]
		require.Equal(t, raw, dl.Envelope, "the DLQ holds the original envelope byte for byte")
		require.Equal(t, "crm", dl.Source)
		require.Equal(t, "evt-13", dl.ID)
		require.Contains(t, dl.Reason, "permanent")
		require.Equal(t, 1, dl.Attempts)
		require.Contains(t, dl.FirstError, "data.fail=permanent")
		require.Contains(t, dl.LastError, "data.fail=permanent")
		require.Empty(t, dl.Resolution)
		require.False(t, dl.DeadAt.IsZero())
		ev, err := seqbox.ParseEvent(raw)
		require.NoError(t, err)
		require.Equal(t, ev.Hash, dl.PayloadHash)
		require.Equal(t, []string{"dead_lettered"}, auditOutcomes(b.audit(t)))

		// The identity stays recorded: a redelivery is a duplicate and does
		// not add a second DLQ copy.
		require.Equal(t, seqbox.Duplicate, deliver(t, c, raw, 2).Outcome)
		require.Len(t, b.dlq(t, true), 1)
	})

	t.Run("FirstAndLastError", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		var calls atomic.Int32
		c := b.consumer(t, func(c *seqbox.Config) {
			c.Handler = scriptedHandler(inboxConsumer, &calls, errors.New("first: timeout"),
				seqbox.Permanent(errors.New("second: schema mismatch")))
		})
		raw := simple(t, "evt-1")
		require.Equal(t, seqbox.Retry, deliver(t, c, raw, 1).Outcome)
		d := deliver(t, c, raw, 2)
		require.Equal(t, seqbox.DeadLettered, d.Outcome)
		dls := b.dlq(t, false)
		require.Len(t, dls, 1)
		require.Equal(t, raw, dls[0].Envelope)
		require.Equal(t, 2, dls[0].Attempts)
		require.Contains(t, dls[0].FirstError, "first: timeout")
		require.Contains(t, dls[0].LastError, "second: schema mismatch")
		require.Contains(t, dls[0].Reason, "permanent")
		require.Equal(t, 0, b.effects(t, ""))
	})

	t.Run("AttemptsExhausted", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		var calls atomic.Int32
		c := b.consumer(t, func(c *seqbox.Config) {
			c.Handler = scriptedHandler(inboxConsumer, &calls, errors.New("down #1"), errors.New("down #2"), errors.New("down #3"))
		})
		raw := simple(t, "evt-1")
		for attempt := 1; attempt <= 2; attempt++ {
			d := deliver(t, c, raw, attempt)
			require.Equal(t, seqbox.Retry, d.Outcome, "attempt %d", attempt)
		}
		d := deliver(t, c, raw, 3)
		require.Equal(t, seqbox.DeadLettered, d.Outcome)
		require.Contains(t, d.Reason, "attempts exhausted")
		require.Equal(t, 0, b.effects(t, ""))
		require.Equal(t, store.Counts{InboxRows: 1, DeadLetters: 1}, b.counts(t))

		dls := b.dlq(t, false)
		require.Len(t, dls, 1)
		require.Equal(t, raw, dls[0].Envelope)
		require.Equal(t, 3, dls[0].Attempts)
		require.Contains(t, dls[0].Reason, "attempts exhausted")
		require.Contains(t, dls[0].FirstError, "down #1")
		require.Contains(t, dls[0].LastError, "down #3")
		require.Equal(t, []string{"retry", "retry", "dead_lettered"}, auditOutcomes(b.audit(t)))
	})

	t.Run("RedriveKeepsIdentity", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		ctx := context.Background()
		var broken atomic.Bool
		broken.Store(true)
		record := replay.RecordHandler(inboxConsumer)
		c := b.consumer(t, func(c *seqbox.Config) {
			c.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqbox.Event) error {
				if broken.Load() {
					return seqbox.Permanent(errors.New("handler bug"))
				}
				return record(ctx, tx, ev)
			}
		})
		raw := simple(t, "evt-1")
		require.Equal(t, seqbox.DeadLettered, deliver(t, c, raw, 1).Outcome)
		dls := b.dlq(t, false)
		require.Len(t, dls, 1)

		// Redriving while still broken fails again and keeps it in the DLQ.
		ds, err := c.Redrive(ctx, dls[0].Seq)
		require.NoError(t, err)
		require.Equal(t, seqbox.DeadLettered, ds[0].Outcome)
		require.Equal(t, 0, b.effects(t, ""))
		still := b.dlq(t, false)
		require.Len(t, still, 1, "the failed redrive leaves one open DLQ row")
		require.Equal(t, raw, still[0].Envelope)

		// Fixed: the redrive applies under the original identity.
		broken.Store(false)
		ds, err = c.Redrive(ctx, still[0].Seq)
		require.NoError(t, err)
		require.Equal(t, seqbox.Applied, ds[0].Outcome, ds[0].Reason)
		require.Equal(t, "evt-1", ds[0].ID)
		require.Equal(t, "crm", ds[0].Source)
		require.Equal(t, 1, b.effects(t, "evt-1"))
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts(t))
		require.Equal(t, "applied", b.inboxOutcome(t, "crm", "evt-1"))
		require.Empty(t, b.dlq(t, false), "the DLQ row is resolved")
		all := b.dlq(t, true)
		require.NotEmpty(t, all)
		require.Equal(t, "redriven", all[len(all)-1].Resolution)
		require.NotNil(t, all[len(all)-1].ResolvedAt)

		// Another consumer cannot redrive this consumer's DLQ.
		other := b.consumer(t, func(c *seqbox.Config) { c.Name, c.Handler = "other", replay.RecordHandler("other") })
		_, err = other.Redrive(ctx, still[0].Seq)
		require.ErrorIs(t, err, store.ErrNotFound)

		// Redriving again, or the broker redelivering the original, applies
		// nothing more.
		_, err = c.Redrive(ctx, still[0].Seq)
		require.ErrorIs(t, err, seqbox.ErrNotBlocking)
		_, err = c.Redrive(ctx, dls[0].Seq)
		require.ErrorIs(t, err, seqbox.ErrNotBlocking)
		require.Equal(t, seqbox.Duplicate, deliver(t, c, raw, 2).Outcome)
		require.Equal(t, seqbox.Duplicate, deliver(t, b.consumer(t), raw, 3).Outcome)
		require.Equal(t, 1, b.effects(t, ""))
		require.Equal(t, int64(1), b.counts(t).InboxRows)
	})

	// An operator redrives the same DLQ row twice at once (two terminals,
	// or a retried HTTP call): one applies, the other finds it done.
	t.Run("ConcurrentRedrive", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		ctx := context.Background()
		var broken atomic.Bool
		broken.Store(true)
		record := replay.RecordHandler(inboxConsumer)
		handler := func(ctx context.Context, tx seqbox.Tx, ev seqbox.Event) error {
			if broken.Load() {
				return seqbox.Permanent(errors.New("handler bug"))
			}
			time.Sleep(20 * time.Millisecond)
			return record(ctx, tx, ev)
		}
		c := b.consumer(t, func(c *seqbox.Config) { c.Handler = handler })
		raw := simple(t, "evt-1")
		require.Equal(t, seqbox.DeadLettered, deliver(t, c, raw, 1).Outcome)
		seq := b.dlq(t, false)[0].Seq
		broken.Store(false)

		start := make(chan struct{})
		var wg sync.WaitGroup
		outcomes := make([]seqbox.Outcome, 2)
		errs := make([]error, 2)
		for i := range 2 {
			rc := b.consumer(t, func(c *seqbox.Config) { c.Handler = handler })
			wg.Go(func() {
				<-start
				ds, err := rc.Redrive(ctx, seq)
				errs[i] = err
				if err == nil {
					outcomes[i] = ds[0].Outcome
				}
			})
		}
		close(start)
		wg.Wait()
		applied := 0
		for i := range 2 {
			switch {
			case errs[i] != nil:
				require.ErrorIs(t, errs[i], seqbox.ErrNotBlocking, "the loser sees the row already resolved")
			case outcomes[i] == seqbox.Applied:
				applied++
			default:
				require.Equal(t, seqbox.Duplicate, outcomes[i])
			}
		}
		require.Equal(t, 1, applied)
		require.Equal(t, 1, b.effects(t, ""))
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts(t))
		require.Empty(t, b.dlq(t, false))
	})

	t.Run("HandlerPanicIsDeadLettered", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer(t, func(c *seqbox.Config) {
			c.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqbox.Event) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO record_effects (consumer, n, source, id, partitionkey, type)
					VALUES ($1, 1, $2, $3, '', $4)`, inboxConsumer, ev.Source, ev.ID, ev.Type); err != nil {
					return err
				}
				panic("nil map in the agent's tool call")
			}
		})
		raw := simple(t, "poison")
		ds, err := c.Deliver(context.Background(), raw, 1)
		require.NoError(t, err, "a panic is an outcome, not a crash")
		require.Equal(t, seqbox.DeadLettered, ds[0].Outcome)
		require.Equal(t, 0, b.effects(t, ""), "the panicking handler's write is rolled back")
		require.Equal(t, store.Counts{InboxRows: 1, DeadLetters: 1}, b.counts(t))
		dls := b.dlq(t, false)
		require.Len(t, dls, 1)
		require.Equal(t, raw, dls[0].Envelope)
		require.Contains(t, dls[0].LastError, "panic")
		require.Contains(t, dls[0].LastError, "nil map in the agent's tool call")
		require.Equal(t, 1, dls[0].Attempts)

		// The consumer keeps working.
		require.Equal(t, seqbox.Applied, deliver(t, b.consumer(t), simple(t, "healthy"), 1).Outcome)
		require.Equal(t, 1, b.effects(t, "healthy"))
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
		{"Oversized", `{"id":"evt-1","source":"crm","type":"t","data":"` + strings.Repeat("x", seqbox.MaxEventSize) + `"}`, "limit", "evt-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupInbox(t, open)
			c := b.consumer(t)
			raw := []byte(tt.raw)
			ds, err := c.Deliver(context.Background(), raw, 1)
			require.NoError(t, err, "a bad envelope is an outcome, not an error")
			require.Len(t, ds, 1)
			d := ds[0]
			require.Equal(t, seqbox.Rejected, d.Outcome)
			require.Contains(t, d.Reason, tt.field, "the reason names the field")
			require.True(t, d.Outcome.Acks())

			require.Equal(t, 0, b.effects(t, ""))
			counts := b.counts(t)
			require.Equal(t, store.Counts{DeadLetters: 1}, counts, "only the DLQ row is written")
			dls := b.dlq(t, false)
			require.Len(t, dls, 1)
			require.Equal(t, raw, dls[0].Envelope, "the DLQ keeps the bytes as received")
			require.Contains(t, dls[0].Reason, "rejected")
			require.Contains(t, dls[0].Reason, tt.field)
			require.Equal(t, tt.id, dls[0].ID)
			audit := b.audit(t)
			require.Equal(t, []string{"rejected"}, auditOutcomes(audit))
			require.Contains(t, audit[0].Reason, tt.field)
			parked, err := b.st.Operator().Parked(context.Background(), b.cfg.Name, "")
			require.NoError(t, err)
			require.Empty(t, parked)
			keys, err := b.st.Operator().Keys(context.Background(), b.cfg.Name, false)
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
			c := b.consumer(t)
			require.Equal(t, seqbox.Rejected, deliver(t, c, raw, 1).Outcome)
			dls := b.dlq(t, false)
			require.Len(t, dls, 1)

			ds, err := c.Redrive(context.Background(), dls[0].Seq)
			require.NoError(t, err)
			require.Equal(t, seqbox.Rejected, ds[0].Outcome)
			open := b.dlq(t, false)
			require.Len(t, open, 1, "one open DLQ row per rejected message, however often it is redriven")
			require.Equal(t, raw, open[0].Envelope)
			require.Equal(t, int64(1), b.counts(t).DeadLetters)
			require.Equal(t, 0, b.effects(t, ""))
			require.Equal(t, int64(0), b.counts(t).InboxRows)
		})
	}
}

// exerciseRedriveOneWithoutIdentity: envelopes rejected for lacking an id
// share the empty identity; redriving one of them must resolve that one
// DLQ row only, not every other identity-less row of the consumer.
func exerciseRedriveOneWithoutIdentity(t *testing.T, open Factory) {
	t.Parallel()
	b := setupInbox(t, open)
	c := b.consumer(t)
	first := []byte(`{"source":"crm","type":"order.placed"}`)
	second := []byte(`{"source":"crm","type":"order.cancelled"}`)
	require.Equal(t, seqbox.Rejected, deliver(t, c, first, 1).Outcome)
	require.Equal(t, seqbox.Rejected, deliver(t, c, second, 1).Outcome)
	dls := b.dlq(t, false)
	require.Len(t, dls, 2)
	require.Equal(t, first, dls[0].Envelope)

	ds, err := c.Redrive(context.Background(), dls[0].Seq)
	require.NoError(t, err)
	require.Equal(t, seqbox.Rejected, ds[0].Outcome)
	var bodies []string
	for _, dl := range b.dlq(t, false) {
		bodies = append(bodies, string(dl.Envelope))
	}
	require.Contains(t, bodies, string(second), "the row that was not redriven stays open")
	require.Len(t, bodies, 2, "the redriven envelope is rejected again; the other is still waiting")
}

// exerciseConcurrency: two deliveries of one identity racing on separate
// connections. The database is the arbiter: exactly one applies.
func exerciseConcurrency(t *testing.T, open Factory) {
	t.Run("SameIDConcurrently", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		var calls atomic.Int32
		record := replay.RecordHandler(inboxConsumer)
		slow := func(ctx context.Context, tx seqbox.Tx, ev seqbox.Event) error {
			calls.Add(1)
			time.Sleep(30 * time.Millisecond) // hold the transaction open while the other races
			return record(ctx, tx, ev)
		}
		raw := simple(t, "evt-race")
		// Two consumer instances with the same name: two workers or two
		// processes competing for copies of one message.
		consumers := []*seqbox.Consumer{
			b.consumer(t, func(c *seqbox.Config) { c.Handler = slow }),
			b.consumer(t, func(c *seqbox.Config) { c.Handler = slow }),
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		results := make([]seqbox.Outcome, len(consumers))
		errs := make([]error, len(consumers))
		for i, c := range consumers {
			wg.Go(func() {
				<-start
				ds, err := c.Deliver(context.Background(), raw, 1)
				errs[i] = err
				if err == nil {
					results[i] = ds[0].Outcome
				}
			})
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.ElementsMatch(t, []seqbox.Outcome{seqbox.Applied, seqbox.Duplicate}, results)
		require.Equal(t, int32(1), calls.Load(), "the loser never reaches the handler")
		require.Equal(t, 1, b.effects(t, ""))
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts(t))
		require.Equal(t, []string{"duplicate"}, auditOutcomes(b.audit(t)))
	})

	t.Run("ManyIDsManyRacers", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		const ids, racers = 10, 3
		var wg sync.WaitGroup
		var applied, duplicates atomic.Int32
		errs := make(chan error, ids*racers)
		raws := make([][]byte, ids)
		for i := range ids {
			raws[i] = simple(t, fmt.Sprintf("evt-%d", i))
		}
		for r := range racers {
			c := b.consumer(t)
			wg.Go(func() {
				for i := range ids {
					ds, err := c.Deliver(context.Background(), raws[(i+r)%ids], 1)
					if err != nil {
						errs <- err
						continue
					}
					switch ds[0].Outcome {
					case seqbox.Applied:
						applied.Add(1)
					case seqbox.Duplicate:
						duplicates.Add(1)
					default:
						errs <- fmt.Errorf("unexpected outcome %s: %s", ds[0].Outcome, ds[0].Reason)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, int32(ids), applied.Load())
		require.Equal(t, int32(ids*(racers-1)), duplicates.Load())
		require.Equal(t, ids, b.effects(t, ""))
		for i := range ids {
			require.Equal(t, 1, b.effects(t, fmt.Sprintf("evt-%d", i)))
		}
		require.Equal(t, int64(ids), b.counts(t).InboxRows)
	})
}

// fakeTransport hands out scripted batches, one per Receive call, and
// records what was settled. When gate is set, batches after the first wait
// for it to close. Once the script is used up, the next Receive closes
// release (if set) and every later one returns an empty batch.
type fakeTransport struct {
	mu       sync.Mutex
	script   [][]*fakeDelivery
	calls    int
	gate     chan struct{}
	release  chan struct{}
	released bool
	acks     []string
	nacks    []string
}

var _ transport.Transport = (*fakeTransport)(nil)

func (f *fakeTransport) delivery(body []byte) *fakeDelivery {
	return &fakeDelivery{f: f, body: body, attempt: 1}
}

func (f *fakeTransport) Receive(ctx context.Context, max int) ([]transport.Delivery, error) {
	f.mu.Lock()
	f.calls++
	if len(f.script) > 0 {
		next := f.script[0]
		f.script = f.script[1:]
		gate := f.gate
		first := f.calls == 1
		f.mu.Unlock()
		if gate != nil && !first {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		out := make([]transport.Delivery, len(next))
		for i, d := range next {
			out[i] = d
		}
		return out, nil
	}
	if f.release != nil && !f.released {
		// Every scripted batch has been handed to the consumer's scheduler.
		f.released = true
		close(f.release)
	}
	f.mu.Unlock()
	t := time.NewTimer(5 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, nil
	}
}

func (f *fakeTransport) Close() error { return nil }

func (f *fakeTransport) acked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.acks...)
}

func (f *fakeTransport) nacked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.nacks...)
}

type fakeDelivery struct {
	f       *fakeTransport
	body    []byte
	attempt int
}

func (d *fakeDelivery) id() string {
	var m struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(d.body, &m)
	return m.ID
}

func (d *fakeDelivery) Body() []byte { return d.body }
func (d *fakeDelivery) Attempt() int { return d.attempt }

func (d *fakeDelivery) Ack(context.Context) error {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	d.f.acks = append(d.f.acks, d.id())
	return nil
}

func (d *fakeDelivery) Nack(context.Context, time.Duration) error {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	d.f.nacks = append(d.f.nacks, d.id())
	return nil
}

func (d *fakeDelivery) Extend(context.Context, time.Duration) error { return nil }
