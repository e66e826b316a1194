package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// exerciseFailureWindows interrupts the consumer at each window of the seed
// ("Teste as janelas de falha"): whatever the window, the message is either
// wholly applied or not at all, and the redelivery leaves exactly one
// effect.
func exerciseFailureWindows(t *testing.T, open Factory) {
	// A crash inside the transaction (or before it) leaves nothing behind:
	// the redelivery applies the message, once.
	for _, p := range []fault.Point{
		fault.BeforeTx, fault.AfterInboxInsert, fault.AfterHandler, fault.BeforeCommit,
	} {
		t.Run("CrashAt_"+string(p), func(t *testing.T) {
			t.Parallel()
			b := setupInbox(t, open)
			ctx := context.Background()
			raw := simple(t, "evt-1")

			var hits atomic.Int32
			crashing := b.consumer(withHook(crashAt(p, &hits)))
			results, err := crashing.Deliver(ctx, raw, 1)
			require.ErrorIs(t, err, fault.ErrCrash)
			require.True(t, fault.IsCrash(err))
			require.Nil(t, results)
			require.Equal(t, int32(1), hits.Load(), "the fault point is reached exactly once")

			require.Equal(t, int64(0), b.counts().InboxRows, "the identity was rolled back with the crash")
			require.Equal(t, 0, b.effectCount(""), "the effect was rolled back with the crash")
			require.Empty(t, b.audit(""), "no outcome was recorded")
			require.Empty(t, b.deadLetters(true))

			// The broker redelivers to a restarted consumer.
			restarted := b.consumer()
			res := deliver(t, restarted, raw, 2)
			require.Equal(t, seqboxtype.Applied, res.Outcome, res.Reason)
			require.Equal(t, 1, b.effectCount("evt-1"))
			require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts())
			require.Equal(t, "applied", b.inboxOutcome("crm", "evt-1"))

			// And any later copy is a duplicate.
			res = deliver(t, restarted, raw, 3)
			require.Equal(t, seqboxtype.Duplicate, res.Outcome)
			require.Equal(t, 1, b.effectCount(""))
			require.Empty(t, b.audit(""), "a duplicate adds no audit row")
			require.Equal(t, 1, b.duplicates(""), "the repetition is counted on its inbox row")
		})
	}

	// Committed, then the process died before the ACK: the broker
	// redelivers and the inbox absorbs it.
	t.Run("CrashAfterCommitBeforeAck", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer()
		raw := simple(t, "evt-1")
		res := deliver(t, c, raw, 1)
		require.Equal(t, seqboxtype.Applied, res.Outcome, res.Reason)
		// (no ack) — the redelivery reaches a restarted consumer.
		res = deliver(t, b.consumer(), raw, 2)
		require.Equal(t, seqboxtype.Duplicate, res.Outcome)
		require.Contains(t, res.Reason, "applied", "the duplicate names what the identity ended in")
		require.Equal(t, 1, b.effectCount(""))
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts())
		require.Empty(t, b.audit(""), "a duplicate adds no audit row")
		var dups int
		require.NoError(t, b.st.DB().QueryRowContext(context.Background(), `SELECT duplicates FROM seqbox_inbox
			WHERE consumer = $1 AND source = 'crm' AND id = 'evt-1'`, b.cfg.Name).Scan(&dups))
		require.Equal(t, 1, dups, "the repetition is counted on evt-1's inbox row")
	})

	// A crash in the middle of a batch rolls back every delivery of the
	// batch, the ones before the crash too, and acknowledges none.
	t.Run("CrashMidBatch", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		exerciseMidBatchCrash(t, b)
	})
}

func exerciseMidBatchCrash(t *testing.T, b *env) {
	ctx := context.Background()
	ft := &fakeTransport{release: make(chan struct{}), gate: make(chan struct{})}
	first := ft.delivery(simple(t, "first"))
	batch := []*fakeDelivery{
		ft.delivery(simple(t, "m1")), ft.delivery(simple(t, "m2")), ft.delivery(simple(t, "m3")), ft.delivery(simple(t, "m4")),
	}
	ft.script = [][]*fakeDelivery{{first}, batch}

	var midBatch, beforeTx atomic.Int32
	hook := func(p fault.Point) error {
		switch p {
		case fault.BeforeTx:
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
		case fault.MidBatch:
			midBatch.Add(1)
			return fault.ErrCrash
		}
		return nil
	}
	c := b.consumer(func(c *seqbox.Config) {
		c.Transport = ft
		c.Workers, c.BatchSize = 1, 8
	}, withHook(hook))
	runCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := c.Run(runCtx)
	require.ErrorIs(t, err, fault.ErrCrash, "Run stops at the injected crash")
	require.Equal(t, int32(1), midBatch.Load())

	require.Equal(t, 1, b.effectCount(""), "only the batch before the crash applied")
	require.Equal(t, 1, b.effectCount("first"))
	require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts(), "m1 and m2 ran before the crash and were rolled back")
	require.Empty(t, b.audit(""))
	require.Equal(t, []string{"first"}, ft.acked(), "nothing of the crashed batch is acknowledged")
	require.Empty(t, ft.nacked(), "a crash settles nothing")

	// The broker redelivers the four to a restarted consumer.
	restarted := b.consumer()
	for _, d := range batch {
		got := deliver(t, restarted, d.body, 2)
		require.Equal(t, seqboxtype.Applied, got.Outcome, got.Reason)
	}
	require.Equal(t, 5, b.effectCount(""))
	for _, id := range []string{"first", "m1", "m2", "m3", "m4"} {
		require.Equal(t, 1, b.effectCount(id), id)
	}
	require.Equal(t, store.Counts{InboxRows: 5, Applied: 5}, b.counts())
}

// exerciseIdentity covers what the inbox decides from identity and hash:
// duplicate, collision, semantic duplicate, consumers kept apart.
func exerciseIdentity(t *testing.T, open Factory) {
	t.Run("Collision", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer()
		first := []byte(`{"id":"evt-482","source":"erp","type":"stock.reserved","data":{"qty":10}}`)
		second := []byte(`{"id":"evt-482","source":"erp","type":"stock.reserved","data":{"qty":12}}`)
		require.Equal(t, seqboxtype.Applied, deliver(t, c, first, 1).Outcome)

		res := deliver(t, c, second, 1)
		require.Equal(t, seqboxtype.Collision, res.Outcome)
		require.Contains(t, res.Reason, "hash")
		require.Equal(t, 1, b.effectCount(""), "the second payload applies nothing")
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1, Parked: 1}, b.counts())
		require.Equal(t, "applied", b.inboxOutcome("erp", "evt-482"), "the recorded identity is not overwritten")

		parked, err := b.st.Executor().ParkedList(context.Background(), store.KeyRef{Consumer: b.cfg.Name, Key: ""})
		require.NoError(t, err)
		require.Len(t, parked, 1)
		require.Equal(t, seqboxtype.ParkCollision, parked[0].Reason)
		require.Equal(t, "collision", string(parked[0].Reason), "the name stored on the row")
		require.Equal(t, "evt-482", parked[0].ID)
		require.Equal(t, second, parked[0].Envelope, "the second payload is kept for investigation, byte for byte")
		ev2, err := seqboxtype.ParseEvent(second)
		require.NoError(t, err)
		require.Equal(t, ev2.Hash, parked[0].PayloadHash)

		audit := b.audit("")
		require.Equal(t, []string{"collision"}, auditOutcomes(audit))
		require.NotEmpty(t, audit[0].NextAction)

		// The original payload is still a plain duplicate.
		require.Equal(t, seqboxtype.Duplicate, deliver(t, c, first, 2).Outcome)
		require.Equal(t, 1, b.effectCount(""))
	})

	t.Run("RepublishedWithNewPublishedAt", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer()
		first := []byte(`{"id":"evt-9","source":"crm","type":"task.create","publishedat":"2026-10-09T12:00:00Z","data":{"a":1}}`)
		// Same fact, republished later, with reordered keys and a trace.
		again := []byte(`{"data": {"a": 1}, "type": "task.create", "source": "crm", "id": "evt-9",
			"publishedat": "2026-10-09T12:05:00Z", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`)
		require.Equal(t, seqboxtype.Applied, deliver(t, c, first, 1).Outcome)
		res := deliver(t, c, again, 1)
		require.Equal(t, seqboxtype.Duplicate, res.Outcome, "publishedat and traceparent are volatile: %s", res.Reason)
		require.Equal(t, 1, b.effectCount(""))
		require.Equal(t, store.Counts{InboxRows: 1, Applied: 1}, b.counts())
		require.Empty(t, b.audit(""), "a duplicate adds no audit row")
		require.Equal(t, 1, b.duplicates(""), "the repetition is counted on its inbox row")
	})

	// docs/design.md §3: the hash leaves out publishedat, traceparent, tracestate,
	// delivery metadata "plus any the consumer configures". Configuring an
	// extra volatile attribute must not make publishedat significant again.
	t.Run("ConsumerVolatileAttributesAddToDefaults", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer(func(c *seqbox.Config) { c.VolatileAttributes = []string{"relayhop"} })
		first := []byte(`{"id":"evt-9","source":"crm","type":"t","relayhop":"a","publishedat":"2026-10-09T12:00:00Z"}`)
		hop := []byte(`{"id":"evt-9","source":"crm","type":"t","relayhop":"b","publishedat":"2026-10-09T12:00:00Z"}`)
		republished := []byte(`{"id":"evt-9","source":"crm","type":"t","relayhop":"a","publishedat":"2026-10-09T12:07:00Z"}`)
		require.Equal(t, seqboxtype.Applied, deliver(t, c, first, 1).Outcome)
		res := deliver(t, c, hop, 1)
		require.Equal(t, seqboxtype.Duplicate, res.Outcome, "the configured attribute is volatile: %s", res.Reason)
		res = deliver(t, c, republished, 1)
		require.Equal(t, seqboxtype.Duplicate, res.Outcome, "publishedat stays volatile when the consumer adds its own: %s", res.Reason)
		require.Equal(t, 1, b.effectCount(""))
		require.Equal(t, int64(0), b.counts().Parked, "nothing parked as a collision")
	})

	t.Run("SemanticDuplicate", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer()
		key := "criar_tarefa_followup:oportunidade_2481:reuniao_184"
		first := event(t, map[string]any{"id": "evt-1", "source": "crm", "type": "meeting.held", "businesskey": key})
		other := event(t, map[string]any{"id": "evt-2", "source": "crm", "type": "meeting.held", "businesskey": key})
		require.Equal(t, seqboxtype.Applied, deliver(t, c, first, 1).Outcome)

		res := deliver(t, c, other, 1)
		require.Equal(t, seqboxtype.SemanticDuplicate, res.Outcome)
		require.Contains(t, res.Reason, key)
		require.Equal(t, 1, b.effectCount(""), "the same effect is not applied twice under a new id")
		require.Equal(t, 0, b.effectCount("evt-2"))
		require.Equal(t, store.Counts{InboxRows: 2, Applied: 1}, b.counts(), "the new identity is recorded, not applied")
		require.Equal(t, "semantic_duplicate", b.inboxOutcome("crm", "evt-2"))
		audit := b.audit("")
		require.Equal(t, []string{"semantic_duplicate"}, auditOutcomes(audit))
		require.Equal(t, "evt-2", audit[0].ID)

		// Its redelivery is a plain duplicate; a different business key is
		// new work.
		require.Equal(t, seqboxtype.Duplicate, deliver(t, c, other, 2).Outcome)
		third := event(t, map[string]any{"id": "evt-3", "source": "crm", "type": "meeting.held", "businesskey": key + ":v2"})
		require.Equal(t, seqboxtype.Applied, deliver(t, c, third, 1).Outcome)
		require.Equal(t, 2, b.effectCount(""))
	})

	t.Run("SameIDFromAnotherSource", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		c := b.consumer()
		require.Equal(t, seqboxtype.Applied, deliver(t, c, []byte(`{"id":"1","source":"crm","type":"t"}`), 1).Outcome)
		require.Equal(t, seqboxtype.Applied, deliver(t, c, []byte(`{"id":"1","source":"erp","type":"t"}`), 1).Outcome,
			"identity is (source, id)")
		require.Equal(t, 2, b.effectCount(""))
		require.Equal(t, int64(2), b.counts().InboxRows)
	})

	t.Run("IndependentConsumers", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		raw := simple(t, "pedido_confirmado-1")
		names := []string{"estoque", "faturamento", "atendimento"}
		for _, name := range names {
			c := b.consumer(func(c *seqbox.Config) { c.Name, c.Handler = name, replay.RecordHandler(name) })
			require.Equal(t, seqboxtype.Applied, deliver(t, c, raw, 1).Outcome, name)
		}
		for _, name := range names {
			c := b.consumer(func(c *seqbox.Config) { c.Name, c.Handler = name, replay.RecordHandler(name) })
			require.Equal(t, seqboxtype.Duplicate, deliver(t, c, raw, 2).Outcome, name)
			require.Equal(t, 1, countEffects(t, b.st, name, ""), name)
			counts, err := b.st.Executor().Counts(context.Background(), name)
			require.NoError(t, err)
			require.Equal(t, int64(1), counts.InboxRows, name)
			require.Equal(t, int64(1), counts.Applied, name)
		}
		require.Equal(t, int64(0), b.counts().InboxRows, "no identity leaks into another consumer")
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
		c := b.consumer(func(c *seqbox.Config) {
			c.Retention = 30 * 24 * time.Hour
			c.DLQRetention, c.RedriveWindow = 14*24*time.Hour, 24*time.Hour
			c.Now = func() time.Time { return now }
		})
		raw := simple(t, "evt-1")
		require.Equal(t, seqboxtype.Applied, deliver(t, c, raw, 1).Outcome)

		purged, err := b.st.Executor().InboxPurge(ctx, store.InboxPurgeParams{Consumer: b.cfg.Name, Now: t0.Add(29 * 24 * time.Hour), Limit: 100})
		require.NoError(t, err)
		require.Equal(t, int64(0), purged.Removed, "within retention nothing is purged")
		now = t0.Add(29 * 24 * time.Hour)
		require.Equal(t, seqboxtype.Duplicate, deliver(t, c, raw, 2).Outcome)

		purged, err = b.st.Executor().InboxPurge(ctx, store.InboxPurgeParams{Consumer: b.cfg.Name, Now: t0.Add(31 * 24 * time.Hour), Limit: 100})
		require.NoError(t, err)
		require.Equal(t, int64(1), purged.Removed)
		require.Equal(t, int64(0), b.counts().InboxRows)

		// The identity is gone, so this redelivery cannot be recognised and
		// the effect happens a second time. This is exactly why
		// Config.Validate refuses a Retention shorter than the broker's
		// redelivery window or than DLQ retention plus the redrive window:
		// every copy that can still come back must find its identity.
		now = t0.Add(31 * 24 * time.Hour)
		res := deliver(t, c, raw, 3)
		require.Equal(t, seqboxtype.Applied, res.Outcome)
		require.Equal(t, 2, b.effectCount("evt-1"))
		require.Equal(t, int64(1), b.counts().InboxRows)
	})

	t.Run("PurgeInSmallBatchesPerConsumer", func(t *testing.T) {
		t.Parallel()
		b := setupInbox(t, open)
		ctx := context.Background()
		t0 := time.Date(2026, 10, 9, 12, 0, 0, 0, time.UTC)
		const retention = 30 * 24 * time.Hour
		clock := func(c *seqbox.Config) { c.Now, c.Retention = func() time.Time { return t0 }, retention }
		c := b.consumer(clock)
		other := b.consumer(clock, func(c *seqbox.Config) { c.Name, c.Handler = "other", replay.RecordHandler("other") })
		for i := range 5 {
			require.Equal(t, seqboxtype.Applied, deliver(t, c, simple(t, fmt.Sprintf("evt-%d", i)), 1).Outcome)
		}
		require.Equal(t, seqboxtype.Applied, deliver(t, other, simple(t, "evt-0"), 1).Outcome)

		after := t0.Add(retention + time.Hour)
		var got []int64
		for range 4 {
			r, err := b.st.Executor().InboxPurge(ctx, store.InboxPurgeParams{Consumer: b.cfg.Name, Now: after, Limit: 2})
			require.NoError(t, err)
			got = append(got, r.Removed)
		}
		require.Equal(t, []int64{2, 2, 1, 0}, got, "at most batch rows per call, and the count of what was removed")
		require.Equal(t, int64(0), b.counts().InboxRows)
		oc, err := b.st.Executor().Counts(ctx, "other")
		require.NoError(t, err)
		require.Equal(t, int64(1), oc.InboxRows, "purging one consumer leaves the others alone")
		require.Equal(t, 5, b.effectCount(""), "purging identities never touches business data")
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
