package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
	"github.com/stretchr/testify/require"
)

// version 2 fails permanently with OnDeadLetter=block.
func ordPermanentBlock(t *testing.T, open Factory) {
	const k, other = "PED-1006", "PED-2000"

	t.Run("RedriveAfterFix", func(t *testing.T) {
		e := ordSetup(t, open)
		h := newOrdHandler(e.cfg.Name)
		h.failPermanently("E2")
		c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })

		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		raw2 := ordEvent("E2", k, 2, "endereco_alterado")
		results := e.deliver(c, raw2, 1)
		require.Equal(t, []string{"E2:dead_lettered"}, ordSummary(results))
		require.Contains(t, results[0].Reason, "permanent failure")
		kv := e.requireKey(k, ordV(1), true, 0, 0)
		require.Equal(t, ordSource, kv.BlockedSource)
		require.Equal(t, "E2", kv.BlockedID)
		require.Contains(t, kv.BlockedReason, "dead-lettered E2")

		require.Equal(t, []string{"E3:blocked"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
		require.Equal(t, []string{"E4:blocked"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))
		e.requireKey(k, ordV(1), true, 0, 2)
		for _, p := range e.parked(k) {
			require.Equal(t, seqboxtype.ParkBlocked, p.Reason, "%s", p.ID)
		}
		// A broker redelivery of the failed message cannot slip past.
		results = e.deliver(c, raw2, 2)
		require.Equal(t, []string{"E2:duplicate"}, ordSummary(results))
		require.Contains(t, results[0].Reason, "dead_lettered")

		// Other keys keep flowing.
		require.Equal(t, []string{"O1:applied"}, ordSummary(e.deliver(c, ordEvent("O1", other, 1, "pedido_criado"), 1)))
		require.Equal(t, []string{"O2:applied"}, ordSummary(e.deliver(c, ordEvent("O2", other, 2, "pedido_pago"), 1)))
		e.requireObject(other, "pedido_pago", 2)
		require.Equal(t, []string{"E1@1 pedido_criado"}, e.effects(k))

		letters := e.deadLetters(false)
		require.Len(t, letters, 1)
		letter := letters[0]
		require.Equal(t, "E2", letter.ID)
		require.Equal(t, ordSource, letter.Source)
		require.Equal(t, k, letter.PartitionKey)
		require.Equal(t, "2", ordVer(letter.ObjectVersion))
		require.Equal(t, raw2, letter.Envelope, "the DLQ keeps the original envelope unchanged")
		require.Equal(t, 1, letter.Attempts)
		require.Contains(t, letter.Reason, "permanent failure")
		require.Contains(t, letter.LastError, "E2 is broken")
		require.Empty(t, letter.Resolution)
		cn := e.counts()
		require.Equal(t, int64(1), cn.DeadLetters)
		require.Equal(t, int64(2), cn.Blocked)
		require.Equal(t, []string{"E2 dead_lettered 2/1", "E3 blocked 3/1", "E4 blocked 4/1"}, e.auditLines(k))
		require.Equal(t, 1, e.duplicates("E2"))
		require.Contains(t, e.auditRow(k, "E2", seqboxtype.DeadLettered).NextAction, "redrive or skip")
		require.Contains(t, e.auditRow(k, "E3", seqboxtype.Blocked).NextAction, "redrive or skip")

		// The handler is fixed; the operator redrives: 2, then 3, then 4.
		h.fix("E2")
		results, err := c.Redrive(e.ctx, letter.Seq)
		require.NoError(t, err)
		require.Equal(t, []string{"E2:applied", "E3:applied", "E4:applied"}, ordSummary(results))
		require.Equal(t, ordSource, results[0].Source, "the redriven message keeps its identity")
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 endereco_alterado", "E3@3 pedido_pago", "E4@4 pedido_enviado"}, e.effects(k))
		e.requireObject(k, "pedido_enviado", 4)
		e.requireKey(k, ordV(4), false, 0, 0)
		all := e.deadLetters(true)
		require.Len(t, all, 1)
		require.Equal(t, "redriven", all[0].Resolution)
		require.NotNil(t, all[0].ResolvedAt)
		require.Empty(t, e.deadLetters(false))
		require.Empty(t, e.gapLines(k), "nothing was skipped")
		cn = e.counts()
		require.Equal(t, int64(6), cn.Applied)
		require.Zero(t, cn.DeadLetters)
		e.requireNothingParked()

		_, err = c.Redrive(e.ctx, letter.Seq)
		require.ErrorIs(t, err, seqbox.ErrNotBlocking)
		require.Equal(t, []string{"E2:duplicate"}, ordSummary(e.deliver(c, raw2, 3)))
		require.Len(t, e.effects(k), 4)
	})

	t.Run("Skip", func(t *testing.T) {
		e := ordSetup(t, open)
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		raw2 := ordEvent("E2", k, 2, "endereco_alterado", ordFailPermanent())
		require.Equal(t, []string{"E2:dead_lettered"}, ordSummary(e.deliver(c, raw2, 1)))
		require.Equal(t, []string{"E3:blocked"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
		require.Equal(t, []string{"E4:blocked"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))
		require.Equal(t, []string{"O1:applied"}, ordSummary(e.deliver(c, ordEvent("O1", other, 1, "pedido_criado"), 1)))
		letters := e.deadLetters(false)
		require.Len(t, letters, 1)

		_, err := c.Skip(e.ctx, letters[0].Seq, "", "")
		require.Error(t, err, "a skip must say who and why")
		e.requireKey(k, ordV(1), true, 0, 2)

		results, err := c.Skip(e.ctx, letters[0].Seq, "ana@ops", "address change superseded by the payment")
		require.NoError(t, err)
		require.Equal(t, []string{"E3:applied", "E4:applied"}, ordSummary(results))
		require.Equal(t, []string{"2-2 by ana@ops"}, e.gapLines(k))
		require.Equal(t, "address change superseded by the payment", e.gaps(k)[0].Reason)
		all := e.deadLetters(true)
		require.Len(t, all, 1)
		require.Contains(t, all[0].Resolution, "ana@ops")
		require.Contains(t, all[0].Resolution, "address change superseded by the payment")
		require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago", "E4@4 pedido_enviado"}, e.effects(k))
		e.requireObject(k, "pedido_enviado", 4)
		e.requireKey(k, ordV(4), false, 0, 0)
		require.Equal(t, []string{"E2:duplicate"}, ordSummary(e.deliver(c, raw2, 2)), "a skipped message does not come back")
		_, err = c.Skip(e.ctx, letters[0].Seq, "ana@ops", "twice")
		require.ErrorIs(t, err, seqbox.ErrNotBlocking)
		require.Equal(t, []string{"E2 dead_lettered 2/1", "E3 blocked 3/1", "E4 blocked 4/1"}, e.auditLines(k))
		require.Equal(t, 1, e.duplicates("E2"))
		e.requireNothingParked()
	})

	// 4 (not 3) was parked behind the blocked key. After the skip of 2 it
	// still waits for 3, as a held message: bounded by HoldTimeout like any
	// hold.
	t.Run("SkipLeavesGapHeldWithDeadline", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.HoldExpiry = seqbox.HoldExpiryAdvance })
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		require.Equal(t, []string{"E2:dead_lettered"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "x", ordFailPermanent()), 1)))
		require.Equal(t, []string{"E4:blocked"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))
		letters := e.deadLetters(false)
		require.Len(t, letters, 1)
		results, err := c.Skip(e.ctx, letters[0].Seq, "ana@ops", "obsolete")
		require.NoError(t, err)
		require.Empty(t, results, "4 still waits for 3")
		e.requireKey(k, ordV(2), false, 1, 0)
		e.clock.Advance(10 * time.Minute) // far past HoldTimeout (1m)
		results, err = c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"E4:applied"}, ordSummary(results), "a message re-held after a block must get a hold deadline")
		require.Equal(t, []string{"2-2 by ana@ops", "3-3 by hold_expiry=advance"}, e.gapLines(k))
		e.requireObject(k, "pedido_enviado", 4)
		e.requireNothingParked()
	})

	// The fix is incomplete: the redrive fails transiently. The operator
	// then skips the message. Nothing on the key may wait behind it any
	// more.
	t.Run("RedriveRetriesThenSkip", func(t *testing.T) {
		e := ordSetup(t, open)
		h := newOrdHandler(e.cfg.Name)
		h.failPermanently("E2")
		c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		require.Equal(t, []string{"E2:dead_lettered"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "endereco_alterado"), 1)))
		require.Equal(t, []string{"E3:blocked"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
		letters := e.deadLetters(false)
		require.Len(t, letters, 1)

		h.fix("E2")
		h.failOnce("E2")
		results, err := c.Redrive(e.ctx, letters[0].Seq)
		require.NoError(t, err)
		require.Equal(t, []string{"E2:retry"}, ordSummary(results))
		e.requireKey(k, ordV(1), true, 0, 1)
		require.Len(t, e.deadLetters(false), 1, "still in the DLQ")

		results, err = c.Skip(e.ctx, letters[0].Seq, "ana@ops", "give up on the address change")
		require.NoError(t, err)
		require.Equal(t, []string{"E3:applied"}, ordSummary(results))
		results = e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)
		require.Equal(t, []string{"E4:applied"}, ordSummary(results), "nothing waits behind a skipped message (reason: %s)", results[0].Reason)
		require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago", "E4@4 pedido_enviado"}, e.effects(k))
		e.requireObject(k, "pedido_enviado", 4)
		e.requireNothingParked()
	})

	t.Run("HeldSuccessorBecomesBlocked", func(t *testing.T) {
		e := ordSetup(t, open)
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		require.Equal(t, []string{"E3:held"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
		require.Equal(t, []string{"E2:dead_lettered"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "endereco_alterado", ordFailPermanent()), 1)))
		e.requireKey(k, ordV(1), true, 0, 1)
		// The hold deadline of a message now blocked does not apply: the
		// block is the operator's to resolve.
		e.clock.Advance(2 * time.Minute)
		results, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, results)
		e.requireKey(k, ordV(1), true, 0, 1)
		letters := e.deadLetters(false)
		require.Len(t, letters, 1)
		results, err = c.Skip(e.ctx, letters[0].Seq, "ana@ops", "obsolete")
		require.NoError(t, err)
		require.Equal(t, []string{"E3:applied"}, ordSummary(results))
		e.requireObject(k, "pedido_pago", 3)
		require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago"}, e.effects(k))
		e.requireNothingParked()
	})
}

// version 2 fails permanently with OnDeadLetter=release: a known gap, and
// the key continues.
func ordPermanentRelease(t *testing.T, open Factory) {
	e := ordSetup(t, open, func(c *seqbox.Config) { c.OnDeadLetter = seqbox.DeadLetterRelease })
	c := e.consumer()
	const k = "PED-1007"
	e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
	require.Equal(t, []string{"E3:held"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
	raw2 := ordEvent("E2", k, 2, "endereco_alterado", ordFailPermanent())
	results := e.deliver(c, raw2, 1)
	require.Equal(t, []string{"E2:dead_lettered", "E3:applied"}, ordSummary(results))
	require.Equal(t, []string{"2-2 by on_dead_letter=release"}, e.gapLines(k))
	require.Contains(t, e.gaps(k)[0].Reason, "permanent failure")
	e.requireKey(k, ordV(3), false, 0, 0)
	require.Equal(t, []string{"E4:applied"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))

	require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago", "E4@4 pedido_enviado"}, e.effects(k))
	e.requireObject(k, "pedido_enviado", 4)
	require.Equal(t, []string{"E3 held 3/1", "E2 dead_lettered 2/1"}, e.auditLines(k))
	require.Contains(t, e.auditRow(k, "E2", seqboxtype.DeadLettered).NextAction, "redrive")
	letters := e.deadLetters(false)
	require.Len(t, letters, 1, "the failed message stays in the DLQ for the operator")
	require.Equal(t, "E2", letters[0].ID)
	require.Equal(t, raw2, letters[0].Envelope)
	e.requireNothingParked()

	// Redriving it now, after the key moved on, cannot rewind the object:
	// it is stale, and the DLQ row is closed by that final result.
	results, err := c.Redrive(e.ctx, letters[0].Seq)
	require.NoError(t, err)
	require.Equal(t, []string{"E2:stale"}, ordSummary(results))
	require.Len(t, e.effects(k), 3)
	e.requireObject(k, "pedido_enviado", 4)
	var unresolved []string
	for _, letter := range e.deadLetters(false) {
		unresolved = append(unresolved, fmt.Sprintf("seq=%d %s resolution=%q", letter.Seq, letter.ID, letter.Resolution))
	}
	require.Empty(t, unresolved, "a redrive that reached a final outcome (stale) must resolve its DLQ row")
	require.Zero(t, e.counts().DeadLetters)
}

// a transient failure on 2 while 3 arrives: 3 waits and never overtakes.
func ordTransient(t *testing.T, open Factory) {
	const k = "PED-1008"
	for _, gp := range []seqbox.GapPolicy{seqbox.GapHold, seqbox.GapAdvance} {
		t.Run("GapPolicy="+string(gp), func(t *testing.T) {
			e := ordSetup(t, open, func(c *seqbox.Config) { c.GapPolicy = gp })
			h := newOrdHandler(e.cfg.Name)
			h.failOnce("E2")
			c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })
			e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
			raw2 := ordEvent("E2", k, 2, "pedido_pago")
			results := e.deliver(c, raw2, 1)
			require.Equal(t, []string{"E2:retry"}, ordSummary(results))
			require.False(t, results[0].Outcome.Acks(), "a retry is left for redelivery")
			require.Contains(t, results[0].Reason, "attempt 1 of 3")

			results = e.deliver(c, ordEvent("E3", k, 3, "pedido_enviado"), 1)
			require.Equal(t, []string{"E3:held"}, ordSummary(results), "3 must wait behind the retrying 2")
			require.Contains(t, results[0].Reason, "E2")
			require.Equal(t, []string{"E1@1 pedido_criado"}, e.effects(k))
			e.requireKey(k, ordV(1), false, 1, 0)

			results = e.deliver(c, raw2, 2)
			require.Equal(t, []string{"E2:applied", "E3:applied"}, ordSummary(results))
			require.Equal(t, 2, results[0].Attempt)
			require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_enviado"}, e.effects(k))
			e.requireObject(k, "pedido_enviado", 3)
			require.Equal(t, []string{"E2 retry 2/1", "E3 held 3/1"}, e.auditLines(k))
			require.Empty(t, e.gapLines(k), "nothing was skipped")
			require.Equal(t, 2, h.calls["E2"])
			require.Equal(t, 1, h.calls["E3"])
			e.requireNothingParked()
		})
	}

	// 4 (not 3) arrives while 2 is retrying: it parks behind the retry. Once
	// 2 settles, 4 must be treated like any other gap: applied with a
	// recorded gap under GapPolicy=advance ...
	t.Run("ParkedBehindRetryThenGapAdvance", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.GapPolicy = seqbox.GapAdvance })
		h := newOrdHandler(e.cfg.Name)
		h.failOnce("E2")
		c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		raw2 := ordEvent("E2", k, 2, "pedido_pago")
		require.Equal(t, []string{"E2:retry"}, ordSummary(e.deliver(c, raw2, 1)))
		require.Equal(t, []string{"E4:held"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))
		results := e.deliver(c, raw2, 2)
		require.Equal(t, []string{"E2:applied", "E4:applied"}, ordSummary(results),
			"under GapPolicy=advance the parked 4 applies with a recorded gap once 2 settles")
		require.Equal(t, []string{"3-3 by gap_policy=advance"}, e.gapLines(k))
		e.requireObject(k, "pedido_enviado", 4)
		e.requireNothingParked()
	})

	// ... and bounded by HoldTimeout under GapPolicy=hold.
	t.Run("ParkedBehindRetryThenHoldTimeout", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.HoldExpiry = seqbox.HoldExpiryAdvance })
		h := newOrdHandler(e.cfg.Name)
		h.failOnce("E2")
		c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		raw2 := ordEvent("E2", k, 2, "pedido_pago")
		require.Equal(t, []string{"E2:retry"}, ordSummary(e.deliver(c, raw2, 1)))
		require.Equal(t, []string{"E4:held"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))
		require.Equal(t, []string{"E2:applied"}, ordSummary(e.deliver(c, raw2, 2)))
		e.requireKey(k, ordV(2), false, 1, 0)
		e.clock.Advance(10 * time.Minute) // far past HoldTimeout (1m)
		results, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"E4:applied"}, ordSummary(results),
			"a message held for a gap must have a hold deadline even if it was first parked behind a retry")
		require.Equal(t, []string{"3-3 by hold_expiry=advance"}, e.gapLines(k))
		e.requireObject(k, "pedido_enviado", 4)
		e.requireNothingParked()
	})
}

// the consumer restarts during version 3.
func ordRestart(t *testing.T, open Factory) {
	const k = "PED-1009"
	for _, point := range []fault.Point{fault.AfterInboxInsert, fault.AfterHandler, fault.BeforeCommit} {
		t.Run(string(point), func(t *testing.T) {
			e := ordSetup(t, open)
			crash := &ordCrasher{}
			c := e.consumer(withHook(crash.hook))
			e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
			e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)

			raw3 := ordEvent("E3", k, 3, "pedido_enviado")
			crash.arm(point)
			results, err := c.Deliver(e.ctx, raw3, 1)
			require.ErrorIs(t, err, fault.ErrCrash)
			require.True(t, fault.IsCrash(err))
			require.Nil(t, results)
			require.Equal(t, 1, crash.fired)
			// The crash rolled everything of 3 back: no effect, no identity,
			// no version move, nothing parked.
			require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago"}, e.effects(k))
			e.requireObject(k, "pedido_pago", 2)
			require.Equal(t, int64(2), e.counts().InboxRows)
			e.requireNothingParked()

			// Restarted consumer: the broker redelivers 3.
			c2 := e.consumer()
			require.Equal(t, []string{"E3:applied"}, ordSummary(e.deliver(c2, raw3, 2)))
			require.Equal(t, []string{"E3:duplicate"}, ordSummary(e.deliver(c2, raw3, 3)))
			require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_enviado"}, e.effects(k))
			e.requireObject(k, "pedido_enviado", 3)
			require.Empty(t, e.auditLines(k))
			require.Equal(t, 1, e.duplicates("E3"))
		})
	}

	// A crash while 2 unparks the held 3: the unparking rolls back with it, and 3
	// is still parked, not lost.
	t.Run("DuringDrain", func(t *testing.T) {
		e := ordSetup(t, open)
		crash := &ordCrasher{}
		c := e.consumer(withHook(crash.hook))
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		require.Equal(t, []string{"E3:held"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_enviado"), 1)))
		raw2 := ordEvent("E2", k, 2, "pedido_pago")
		crash.arm(fault.BeforeCommit)
		_, err := c.Deliver(e.ctx, raw2, 1)
		require.ErrorIs(t, err, fault.ErrCrash)
		e.requireKey(k, ordV(1), false, 1, 0)
		require.Equal(t, []string{"E1@1 pedido_criado"}, e.effects(k))

		c2 := e.consumer()
		require.Equal(t, []string{"E2:applied", "E3:applied"}, ordSummary(e.deliver(c2, raw2, 2)))
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_enviado"}, e.effects(k))
		e.requireObject(k, "pedido_enviado", 3)
		e.requireNothingParked()
	})
}

// ordMemQueue is a minimal at-least-once transport: a message stays until
// acked; a crashed consumer's leases are expired by the test.
type ordMemQueue struct {
	mu   sync.Mutex
	msgs []*ordMemMsg
}

type ordMemMsg struct {
	body     []byte
	attempts int
	leased   bool
	acked    bool
}

type ordMemDelivery struct {
	q       *ordMemQueue
	m       *ordMemMsg
	attempt int
}

func (q *ordMemQueue) publish(body []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, &ordMemMsg{body: body})
}

func (q *ordMemQueue) Receive(ctx context.Context, max int) ([]transport.Delivery, error) {
	deadline := time.Now().Add(20 * time.Millisecond)
	for {
		q.mu.Lock()
		var out []transport.Delivery
		for _, m := range q.msgs {
			if len(out) == max {
				break
			}
			if !m.acked && !m.leased {
				m.leased = true
				m.attempts++
				out = append(out, &ordMemDelivery{q: q, m: m, attempt: m.attempts})
			}
		}
		q.mu.Unlock()
		if len(out) > 0 || time.Now().After(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (q *ordMemQueue) Close() error { return nil }

// expireLeases makes every unacked message deliverable again, as a lease
// timeout does after a consumer dies.
func (q *ordMemQueue) expireLeases() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range q.msgs {
		m.leased = false
	}
}

func (q *ordMemQueue) unacked() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, m := range q.msgs {
		if !m.acked {
			n++
		}
	}
	return n
}

func (d *ordMemDelivery) Body() []byte { return d.m.body }
func (d *ordMemDelivery) Attempt() int { return d.attempt }
func (d *ordMemDelivery) Ack(context.Context) error {
	d.q.mu.Lock()
	defer d.q.mu.Unlock()
	d.m.acked, d.m.leased = true, false
	return nil
}
func (d *ordMemDelivery) Nack(context.Context, time.Duration) error {
	d.q.mu.Lock()
	defer d.q.mu.Unlock()
	d.m.leased = false
	return nil
}
func (d *ordMemDelivery) Extend(context.Context, time.Duration) error { return nil }

// ordObserved collects the results a consumer reports after commit.
type ordObserved struct {
	mu sync.Mutex
	ds []seqboxtype.Result
}

func (o *ordObserved) observe(res seqboxtype.Result) {
	o.mu.Lock()
	o.ds = append(o.ds, res)
	o.mu.Unlock()
}
func (o *ordObserved) summary() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return ordSummary(o.ds)
}

// the write's confirmation is lost: the commit happened, the ack did not.
func ordLostConfirmation(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	const k = "PED-1010"
	direct := e.consumer()
	e.deliver(direct, ordEvent("E1", k, 1, "pedido_criado"), 1)
	e.deliver(direct, ordEvent("E2", k, 2, "pedido_pago"), 1)

	q := &ordMemQueue{}
	q.publish(ordEvent("E3", k, 3, "pedido_enviado"))
	crash := &ordCrasher{}
	crash.arm(fault.AfterCommit)
	seen1 := &ordObserved{}
	run := func(c *seqbox.Consumer, until func() bool) error {
		ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- c.Run(ctx) }()
		for {
			select {
			case err := <-errc:
				return err
			case <-time.After(5 * time.Millisecond):
				if until != nil && until() {
					cancel()
					return <-errc
				}
			}
		}
	}
	c1 := e.consumer(func(c *seqbox.Config) {
		c.Transport, c.Observer, c.Workers, c.BatchSize = q, seen1.observe, 1, 1
	}, withHook(crash.hook))
	err := run(c1, nil)
	require.ErrorIs(t, err, fault.ErrCrash, "the consumer dies between commit and ack")
	require.Equal(t, []string{"E3:applied"}, seen1.summary(), "the commit happened")
	require.Equal(t, 1, q.unacked(), "the ack did not")
	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_enviado"}, e.effects(k))

	q.expireLeases()
	seen2 := &ordObserved{}
	c2 := e.consumer(func(c *seqbox.Config) {
		c.Transport, c.Observer, c.Workers, c.BatchSize = q, seen2.observe, 1, 1
	})
	require.NoError(t, run(c2, func() bool { return q.unacked() == 0 }))
	require.Equal(t, []string{"E3:duplicate"}, seen2.summary())
	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_enviado"}, e.effects(k), "one effect")
	e.requireObject(k, "pedido_enviado", 3)
	require.Empty(t, e.auditLines(k))
	require.Equal(t, 1, e.duplicates("E3"))
	require.Equal(t, int64(3), e.counts().InboxRows)
}

// two producers publish the same version for one key.
func ordTwoProducers(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const k = "OPP-3100"
	e.deliver(c, ordEvent("A-1", k, 1, "proposta_enviada", ordWithSource("crm-a")), 1)
	require.Equal(t, []string{"A-2:applied"}, ordSummary(e.deliver(c, ordEvent("A-2", k, 2, "cliente_respondeu", ordWithSource("crm-a")), 1)))
	rawB := ordEvent("B-2", k, 2, "reuniao_marcada", ordWithSource("crm-b"))
	results := e.deliver(c, rawB, 1)
	require.Equal(t, []string{"B-2:version_conflict"}, ordSummary(results))
	require.Contains(t, results[0].Reason, "version 2 is already committed under another identity")

	e.requireObject(k, "cliente_respondeu", 2)
	require.Equal(t, []string{"A-1@1 proposta_enviada", "A-2@2 cliente_respondeu"}, e.effects(k))
	kv := e.requireKey(k, ordV(2), false, 0, 0)
	require.Equal(t, 1, kv.Parked, "parked for investigation")
	ps := e.parked(k)
	require.Len(t, ps, 1)
	require.Equal(t, seqboxtype.ParkVersionConflict, ps[0].Reason)
	require.Equal(t, "crm-b", ps[0].Source)
	require.Equal(t, "B-2", ps[0].ID)
	require.Equal(t, rawB, ps[0].Envelope)
	require.Equal(t, []string{"B-2 version_conflict 2/2"}, e.auditLines(k))
	a := e.auditRow(k, "B-2", seqboxtype.VersionConflict)
	require.Equal(t, "crm-b", a.Source)
	require.Contains(t, a.Reason, "another identity")
	require.Contains(t, a.NextAction, "investigate")
	cn := e.counts()
	require.Equal(t, int64(1), cn.Parked)
	require.Zero(t, cn.Held)
	require.Zero(t, cn.Blocked)

	// Redelivery of the conflicting copy is a duplicate; the key is not
	// blocked by the investigation and keeps flowing.
	require.Equal(t, []string{"B-2:duplicate"}, ordSummary(e.deliver(c, rawB, 2)))
	require.Len(t, e.parked(k), 1, "parked once")
	require.Equal(t, []string{"A-3:applied"}, ordSummary(e.deliver(c, ordEvent("A-3", k, 3, "oportunidade_ganha", ordWithSource("crm-a")), 1)))
	e.requireObject(k, "oportunidade_ganha", 3)
}
