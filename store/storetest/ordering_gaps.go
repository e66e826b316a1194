package storetest

import (
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// ---------------------------------------------------------------------------
// scenarios

// versions 1, 2 and 3 arrive in sequence.
func ordInOrder(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const k = "PED-1001"
	require.Equal(t, []string{"E1:applied"}, ordSummary(e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)))
	require.Equal(t, []string{"E2:applied"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)))
	require.Equal(t, []string{"E3:applied"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_enviado"), 1)))

	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_enviado"}, e.effects(k))
	e.requireObject(k, "pedido_enviado", 3)
	e.requireKey(k, ordV(3), false, 0, 0)
	require.Empty(t, e.auditLines(k), "an applied outcome needs no audit evidence")
	require.Empty(t, e.gapLines(k))
	c2 := e.counts()
	require.Equal(t, int64(3), c2.InboxRows)
	require.Equal(t, int64(3), c2.Applied)
	require.Equal(t, int64(1), c2.Keys)
	e.requireNothingParked()
}

// versions 1, 3 and 2: 3 is held, then applied in the same pass as 2.
func ordOutOfOrder(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const k = "PED-1002"
	require.Equal(t, []string{"E1:applied"}, ordSummary(e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)))

	results := e.deliver(c, ordEvent("E3", k, 3, "pedido_cancelado"), 1)
	require.Equal(t, []string{"E3:held"}, ordSummary(results))
	require.Contains(t, results[0].Reason, "waiting for version 2 (got 3)")
	kv := e.requireKey(k, ordV(1), false, 1, 0)
	require.Equal(t, "3", ordVer(kv.NextVersion))
	ps := e.parked(k)
	require.Len(t, ps, 1)
	require.Equal(t, "E3", ps[0].ID)
	require.Equal(t, seqboxtype.ParkHeld, ps[0].Reason)
	require.Equal(t, ordT0.Add(time.Minute), ps[0].HoldUntil.UTC(), "hold deadline = now + HoldTimeout")
	require.Equal(t, []string{"E1@1 pedido_criado"}, e.effects(k), "a held event has no effect yet")
	require.Equal(t, int64(1), e.counts().Held)

	results = e.deliver(c, ordEvent("E2", k, 2, "endereco_alterado"), 1)
	require.Equal(t, []string{"E2:applied", "E3:applied"}, ordSummary(results))
	require.Equal(t, "2", ordVer(results[0].ObjectVersion))
	require.Equal(t, "3", ordVer(results[1].ObjectVersion))

	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 endereco_alterado", "E3@3 pedido_cancelado"}, e.effects(k))
	e.requireObject(k, "pedido_cancelado", 3)
	e.requireKey(k, ordV(3), false, 0, 0)
	require.Equal(t, []string{"E3 held 3/1"}, e.auditLines(k))
	a := e.auditRow(k, "E3", seqboxtype.Held)
	require.Contains(t, a.Reason, "waiting for version 2")
	require.Contains(t, a.NextAction, "unparked when version 2 arrives")
	require.Empty(t, e.gapLines(k))
	require.Equal(t, int64(3), e.counts().Applied)
	e.requireNothingParked()
}

// version 2 arrives twice (and a held version arrives twice).
func ordDuplicate(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const k = "PED-1003"
	e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
	e2 := ordEvent("E2", k, 2, "pedido_pago")
	require.Equal(t, []string{"E2:applied"}, ordSummary(e.deliver(c, e2, 1)))

	results := e.deliver(c, e2, 2)
	require.Equal(t, []string{"E2:duplicate"}, ordSummary(results))
	require.Contains(t, results[0].Reason, "applied")
	// The same fact republished with a new publishedat is still the same.
	results = e.deliver(c, ordEvent("E2", k, 2, "pedido_pago", ordWithAttr("publishedat", "2026-09-25T12:09:00Z")), 1)
	require.Equal(t, []string{"E2:duplicate"}, ordSummary(results))

	// A redelivery of a held event is a duplicate too: its identity was
	// recorded when it was parked, and it must not be parked twice.
	e4 := ordEvent("E4", k, 4, "pedido_enviado")
	require.Equal(t, []string{"E4:held"}, ordSummary(e.deliver(c, e4, 1)))
	results = e.deliver(c, e4, 2)
	require.Equal(t, []string{"E4:duplicate"}, ordSummary(results))
	require.Contains(t, results[0].Reason, "held")
	e.requireKey(k, ordV(2), false, 1, 0)

	require.Equal(t, []string{"E3:applied", "E4:applied"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_separado"), 1)))
	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_separado", "E4@4 pedido_enviado"}, e.effects(k),
		"every version has exactly one effect, in version order")
	e.requireObject(k, "pedido_enviado", 4)
	// Duplicates are counted on their inbox rows, not added to the audit
	// (a replay of the same file adds nothing, docs/design.md §17).
	require.Equal(t, []string{"E4 held 4/2"}, e.auditLines(k))
	require.Equal(t, 2, e.duplicates("E2"), "E2 was delivered twice more")
	require.Equal(t, 1, e.duplicates("E4"))
	cn := e.counts()
	require.Equal(t, int64(4), cn.InboxRows)
	require.Equal(t, int64(4), cn.Applied)
	e.requireNothingParked()
}

// version 4 arrives without 3: held until 3 arrives or HoldTimeout passes.
func ordMissingVersion(t *testing.T, open Factory) {
	const k = "PED-1004"
	start := func(t *testing.T, expiry seqbox.HoldExpiry) (*env, *seqbox.Consumer) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.HoldExpiry = expiry })
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)
		results := e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)
		require.Equal(t, []string{"E4:held"}, ordSummary(results))
		require.Contains(t, results[0].Reason, "waiting for version 3 (got 4)")
		e.requireKey(k, ordV(2), false, 1, 0)

		// Before the deadline the sweeper leaves the hold alone.
		e.clock.Advance(30 * time.Second)
		results, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, results)
		e.requireKey(k, ordV(2), false, 1, 0)
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago"}, e.effects(k))
		e.clock.Advance(31 * time.Second) // past HoldTimeout (1m)
		return e, c
	}

	t.Run("ArrivesBeforeTimeout", func(t *testing.T) {
		e, c := start(t, seqbox.HoldExpiryBlock)
		require.Equal(t, []string{"E3:applied", "E4:applied"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_separado"), 1)))
		e.requireObject(k, "pedido_enviado", 4)
		require.Empty(t, e.gapLines(k))
		e.requireNothingParked()
	})

	t.Run("HoldExpiryBlock", func(t *testing.T) {
		e, c := start(t, seqbox.HoldExpiryBlock)
		results, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, results, "blocking applies nothing")
		kv := e.requireKey(k, ordV(2), true, 0, 1)
		require.Empty(t, kv.BlockedID, "a gap block is behind no message")
		require.Contains(t, kv.BlockedReason, "hold timed out after 1m0s waiting before version 4")
		ps := e.parked(k)
		require.Len(t, ps, 1)
		require.Equal(t, seqboxtype.ParkBlocked, ps[0].Reason)
		require.Equal(t, "E4", ps[0].ID)
		require.Equal(t, int64(1), e.counts().Blocked)
		// One "since" for the stuck key: the block keeps the time the hold
		// began, in the key's report (keys list, the admin API) and in the
		// oldest-stuck count (the overview, seqbox_oldest_stuck_age_seconds).
		require.True(t, kv.BlockedSince.After(ps[0].ParkedAt), "the block came a minute after the hold")
		rep, err := ops.Reporter{Op: e.st.Executor(), Consumer: e.cfg.Name}.Key(e.ctx, k)
		require.NoError(t, err)
		require.NotNil(t, rep.Since)
		require.Equal(t, ps[0].ParkedAt.UTC().Format(time.RFC3339Nano), *rep.Since)
		require.Equal(t, ps[0].ParkedAt.UTC(), e.counts().OldestStuck.UTC())
		stuck, err := e.st.Executor().KeyViewList(e.ctx, store.KeyViewListParams{Consumer: e.cfg.Name, Stuck: true})
		require.NoError(t, err)
		require.Len(t, stuck, 1)
		require.Equal(t, k, stuck[0].Key)

		// Successors park as blocked; a redelivery of 4 is a duplicate.
		results = e.deliver(c, ordEvent("E5", k, 5, "pedido_entregue"), 1)
		require.Equal(t, []string{"E5:blocked"}, ordSummary(results))
		require.Contains(t, results[0].Reason, "hold timed out")
		require.Equal(t, []string{"E4:duplicate"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 2)))
		e.requireKey(k, ordV(2), true, 0, 2)
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago"}, e.effects(k))

		_, err = c.ReleaseKey(e.ctx, k, "", "")
		require.Error(t, err, "a release must say who and why")
		results, err = c.ReleaseKey(e.ctx, k, "ana@ops", "version 3 confirmed lost at the source")
		require.NoError(t, err)
		require.Equal(t, []string{"E4:applied", "E5:applied"}, ordSummary(results))
		require.Equal(t, []string{"3-3 by ana@ops"}, e.gapLines(k))
		require.Equal(t, "version 3 confirmed lost at the source", e.gaps(k)[0].Reason)
		e.requireObject(k, "pedido_entregue", 5)
		e.requireKey(k, ordV(5), false, 0, 0)
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E4@4 pedido_enviado", "E5@5 pedido_entregue"}, e.effects(k))

		// 3 turns up after the gap was recorded: too late.
		results = e.deliver(c, ordEvent("E3", k, 3, "pedido_separado"), 1)
		require.Equal(t, []string{"E3:stale"}, ordSummary(results))
		require.Equal(t, []string{"E4 held 4/2", "E5 blocked 5/2", "E3 stale 3/5"}, e.auditLines(k))
		require.Equal(t, 1, e.duplicates("E4"))
		_, err = c.ReleaseKey(e.ctx, k, "ana@ops", "again")
		require.Error(t, err, "the key is no longer blocked")
		e.requireNothingParked()
	})

	t.Run("HoldExpiryAdvance", func(t *testing.T) {
		e, c := start(t, seqbox.HoldExpiryAdvance)
		results, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"E4:applied"}, ordSummary(results))
		gs := e.gaps(k)
		require.Equal(t, []string{"3-3 by hold_expiry=advance"}, e.gapLines(k))
		require.Contains(t, gs[0].Reason, "hold timed out")
		e.requireObject(k, "pedido_enviado", 4)
		e.requireKey(k, ordV(4), false, 0, 0)
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E4@4 pedido_enviado"}, e.effects(k))

		results = e.deliver(c, ordEvent("E3", k, 3, "pedido_separado"), 1)
		require.Equal(t, []string{"E3:stale"}, ordSummary(results))
		require.Contains(t, results[0].Reason, "version 3 is older than the committed version 4")
		require.Equal(t, []string{"E4 held 4/2", "E3 stale 3/4"}, e.auditLines(k))
		results, err = c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, results)
		e.requireNothingParked()
	})
}

// GapPolicy=advance: 4 applies at once with a recorded gap.
func ordGapAdvance(t *testing.T, open Factory) {
	e := ordSetup(t, open, func(c *seqbox.Config) { c.GapPolicy = seqbox.GapAdvance })
	c := e.consumer()
	const k = "PED-1005"
	e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
	e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)
	require.Equal(t, []string{"E4:applied"}, ordSummary(e.deliver(c, ordEvent("E4", k, 4, "pedido_enviado"), 1)))
	require.Equal(t, []string{"3-3 by gap_policy=advance"}, e.gapLines(k))
	require.Contains(t, e.gaps(k)[0].Reason, "version 4 arrived while 3 was expected")
	e.requireObject(k, "pedido_enviado", 4)

	results := e.deliver(c, ordEvent("E3", k, 3, "pedido_separado"), 1)
	require.Equal(t, []string{"E3:stale"}, ordSummary(results))
	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E4@4 pedido_enviado"}, e.effects(k))
	require.Equal(t, []string{"E3 stale 3/4"}, e.auditLines(k))
	require.Contains(t, e.auditRow(k, "E3", seqboxtype.Stale).NextAction, "none")
	e.requireNothingParked()
}
