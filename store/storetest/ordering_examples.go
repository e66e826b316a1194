package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// one key concentrates disproportionate volume, interleaved with others.
func ordHotKey(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const hot, hotN, others, otherN = "HOT", 120, 4, 8
	next := map[string]int{}
	var want = map[string][]string{}
	deliverKey := func(key string, v int, wantOutcomes ...string) {
		id := fmt.Sprintf("%s-%d", key, v)
		results := e.deliver(c, ordEvent(id, key, v, fmt.Sprintf("step_%d", v)), 1)
		require.Equal(t, wantOutcomes, ordSummary(results), "delivering %s", id)
	}
	for v := 1; v <= hotN; v++ {
		want[hot] = append(want[hot], fmt.Sprintf("%s-%d@%d step_%d", hot, v, v, v))
	}
	for o := range others {
		key := fmt.Sprintf("COLD-%d", o)
		for v := 1; v <= otherN; v++ {
			want[key] = append(want[key], fmt.Sprintf("%s-%d@%d step_%d", key, v, v, v))
		}
	}
	// The hot key arrives with every tenth pair swapped, so it holds now
	// and then; a cold key's event comes in after every few hot ones and
	// must apply at once, never waiting for the hot key.
	for v := 1; v <= hotN; v++ {
		switch {
		case v%10 == 4:
			deliverKey(hot, v+1, fmt.Sprintf("%s-%d:held", hot, v+1))
		case v%10 == 5:
			deliverKey(hot, v-1, fmt.Sprintf("%s-%d:applied", hot, v-1), fmt.Sprintf("%s-%d:applied", hot, v))
		default:
			deliverKey(hot, v, fmt.Sprintf("%s-%d:applied", hot, v))
		}
		if v%4 == 0 {
			key := fmt.Sprintf("COLD-%d", (v/4)%others)
			if next[key] < otherN {
				next[key]++
				deliverKey(key, next[key], fmt.Sprintf("%s-%d:applied", key, next[key]))
			}
		}
	}
	for o := range others {
		key := fmt.Sprintf("COLD-%d", o)
		for next[key] < otherN {
			next[key]++
			deliverKey(key, next[key], fmt.Sprintf("%s-%d:applied", key, next[key]))
		}
	}
	for key, w := range want {
		require.Equal(t, w, e.effects(key), "effects of %s in version order", key)
	}
	e.requireObject(hot, fmt.Sprintf("step_%d", hotN), hotN)
	e.requireObject("COLD-0", fmt.Sprintf("step_%d", otherN), otherN)
	cn := e.counts()
	require.Equal(t, int64(hotN+others*otherN), cn.Applied)
	require.Equal(t, int64(1+others), cn.Keys)
	require.Len(t, e.auditLines(hot), hotN/10, "one held per swapped pair")
	e.requireNothingParked()
}

// the event arrives after its business deadline.
func ordDeadline(t *testing.T, open Factory) {
	const k = "PED-1011"
	t.Run("NextVersionExpired", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.MaxAge = time.Hour })
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado", ordWithTime(ordT0.Add(-30*time.Minute))), 1)
		results := e.deliver(c, ordEvent("E2", k, 2, "lembrete_pagamento", ordWithTime(ordT0.Add(-2*time.Hour))), 1)
		require.Equal(t, []string{"E2:expired"}, ordSummary(results))
		require.Contains(t, results[0].Reason, "past the 1h0m0s business deadline")
		// The expired version is a known gap, so its successors do not wait
		// for it.
		require.Equal(t, []string{"2-2 by pipeline"}, e.gapLines(k))
		require.Contains(t, e.gaps(k)[0].Reason, "expired")
		require.Equal(t, []string{"E3:applied"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago", ordWithTime(ordT0.Add(-10*time.Minute))), 1)))
		// An expired event that was held: unparked by its predecessor, it is
		// expired at release and the one after it still applies.
		require.Equal(t, []string{"E5:held"}, ordSummary(e.deliver(c, ordEvent("E5", k, 5, "pedido_enviado", ordWithTime(ordT0)), 1)))
		results = e.deliver(c, ordEvent("E4", k, 4, "oferta_relampago", ordWithTime(ordT0.Add(-3*time.Hour))), 1)
		require.Equal(t, []string{"E4:expired", "E5:applied"}, ordSummary(results))

		require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago", "E5@5 pedido_enviado"}, e.effects(k), "no effect for expired events")
		e.requireObject(k, "pedido_enviado", 5)
		require.Equal(t, []string{"E2 expired 2/1", "E5 held 5/3", "E4 expired 4/3"}, e.auditLines(k))
		require.Contains(t, e.auditRow(k, "E4", seqboxtype.Expired).NextAction, "business deadline")
		e.requireNothingParked()
	})

	t.Run("UnkeyedAndFarAhead", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.MaxAge = time.Hour })
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado", ordWithTime(ordT0)), 1)
		// Expired beyond a gap: recorded, no gap, no version move.
		require.Equal(t, []string{"E7:expired"}, ordSummary(e.deliver(c, ordEvent("E7", k, 7, "x", ordWithTime(ordT0.Add(-25*time.Hour))), 1)))
		require.Empty(t, e.gapLines(k))
		e.requireObject(k, "pedido_criado", 1)
		// No time: no deadline.
		require.Equal(t, []string{"E2:applied"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)))
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago"}, e.effects(k))
	})

	// With FirstVersion, an expired first version is the next version too:
	// its successors must not be held for it.
	t.Run("FirstVersionExpired", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.MaxAge = time.Hour; c.FirstVersion = ordV(1) })
		c := e.consumer()
		require.Equal(t, []string{"E1:expired"}, ordSummary(e.deliver(c, ordEvent("E1", k, 1, "pedido_criado", ordWithTime(ordT0.Add(-2*time.Hour))), 1)))
		require.Equal(t, []string{"E2:applied"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "pedido_pago", ordWithTime(ordT0)), 1)),
			"version 1 expired, so version 2 is next")
		require.Equal(t, []string{"1-1 by pipeline"}, e.gapLines(k))
		e.requireObject(k, "pedido_pago", 2)
		e.requireNothingParked()
	})
}

// a person edits the object while the queue processes.
func ordPersonEdits(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const k = "PED-1012"
	e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
	e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)

	// Out of band: the object is edited by hand and its version moves to 5
	// in one transaction with the business write (there is no public API
	// for this yet, so the store transaction is used directly).
	tx, err := e.st.Begin(e.ctx)
	require.NoError(t, err)
	require.NoError(t, tx.KeyEnsure(e.ctx, store.KeyEnsureParams{Consumer: e.cfg.Name, Key: k, At: ordT0}))
	ks, err := tx.KeyLock(e.ctx, store.KeyRef{Consumer: e.cfg.Name, Key: k})
	require.NoError(t, err)
	require.Equal(t, "2", ordVer(ks.Version))
	ok, err := tx.KeyAdvance(e.ctx, store.KeyAdvanceParams{Consumer: e.cfg.Name, Key: k, Prev: ordV(1), Next: 5, At: ordT0})
	require.NoError(t, err)
	require.False(t, ok, "compare-and-set must refuse a wrong previous version")
	ok, err = tx.KeyAdvance(e.ctx, store.KeyAdvanceParams{Consumer: e.cfg.Name, Key: k, Prev: ks.Version, Next: 5, At: ordT0})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = tx.SQL().ExecContext(e.ctx, `UPDATE seqbox_record_objects SET state = $3, version = $4 WHERE consumer = $1 AND partitionkey = $2`,
		e.cfg.Name, k, "editado_manualmente", 5)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())

	for _, late := range []struct {
		id string
		v  int
	}{{"E3", 3}, {"E4", 4}} {
		results := e.deliver(c, ordEvent(late.id, k, late.v, "pedido_enviado"), 1)
		require.Equal(t, []string{late.id + ":stale"}, ordSummary(results))
		require.Contains(t, results[0].Reason, fmt.Sprintf("version %d is older than the committed version 5", late.v))
	}
	e.requireObject(k, "editado_manualmente", 5)
	require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago"}, e.effects(k), "no late event rewrote the edit")
	require.Equal(t, []string{"E3 stale 3/5", "E4 stale 4/5"}, e.auditLines(k))
	require.Equal(t, []string{"E6:applied"}, ordSummary(e.deliver(c, ordEvent("E6", k, 6, "pedido_entregue"), 1)))
	e.requireObject(k, "pedido_entregue", 6)
	// A stale event is never retried: redelivered, it is a duplicate.
	require.Equal(t, []string{"E3:duplicate"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_enviado"), 2)))
	e.requireNothingParked()
}

// FirstVersion set: a key must start there.
func ordFirstVersion(t *testing.T, open Factory) {
	const k, z = "PED-1013", "PED-1014"
	t.Run("Hold", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.FirstVersion = ordV(1) })
		c := e.consumer()
		results := e.deliver(c, ordEvent("E3", k, 3, "pedido_cancelado"), 1)
		require.Equal(t, []string{"E3:held"}, ordSummary(results), "3 is not a baseline when keys start at 1")
		require.Contains(t, results[0].Reason, "waiting for version 1 (got 3)")
		e.requireKey(k, nil, false, 1, 0)
		require.Equal(t, []string{"E1:applied"}, ordSummary(e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)))
		require.Equal(t, []string{"E2:applied", "E3:applied"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "pedido_pago"), 1)))
		require.Equal(t, []string{"E1@1 pedido_criado", "E2@2 pedido_pago", "E3@3 pedido_cancelado"}, e.effects(k))
		e.requireObject(k, "pedido_cancelado", 3)
		require.Equal(t, []string{"E3 held 3/-"}, e.auditLines(k))

		results = e.deliver(c, ordEvent("Z0", z, 0, "rascunho"), 1)
		require.Equal(t, []string{"Z0:stale"}, ordSummary(results), "below FirstVersion")
		require.Contains(t, results[0].Reason, "first version 1")
		require.Equal(t, []string{"Z0 stale 0/-"}, e.auditLines(z))
		require.Empty(t, e.effects(z))
		e.requireNothingParked()
	})

	// The hold times out and HoldExpiry=advance applies 3: the recorded gap
	// must name every missing version, 1 and 2.
	t.Run("HoldExpiryAdvance", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.FirstVersion = ordV(1); c.HoldExpiry = seqbox.HoldExpiryAdvance })
		c := e.consumer()
		require.Equal(t, []string{"E3:held"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_cancelado"), 1)))
		e.clock.Advance(2 * time.Minute)
		results, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"E3:applied"}, ordSummary(results))
		e.requireObject(k, "pedido_cancelado", 3)
		require.Equal(t, []string{"1-2 by hold_expiry=advance"}, e.gapLines(k))
	})
}

// objectversion carried as a string ("5").
func ordStringVersion(t *testing.T, open Factory) {
	e := ordSetup(t, open)
	c := e.consumer()
	const k = "DOC-8"
	require.Equal(t, []string{"S5:applied"}, ordSummary(e.deliver(c, ordEvent("S5", k, "5", "versao_recebida"), 1)))
	e.requireObject(k, "versao_recebida", 5)
	results := e.deliver(c, ordEvent("S7", k, "7", "aprovacao"), 1)
	require.Equal(t, []string{"S7:held"}, ordSummary(results))
	require.Equal(t, "7", ordVer(results[0].ObjectVersion))
	require.Equal(t, []string{"S6:applied", "S7:applied"}, ordSummary(e.deliver(c, ordEvent("S6", k, 6, "revisao"), 1)),
		"a numeric 6 and a string 7 are one sequence")
	require.Equal(t, []string{"S4:stale"}, ordSummary(e.deliver(c, ordEvent("S4", k, "4", "antiga"), 1)))
	require.Equal(t, []string{"S5@5 versao_recebida", "S6@6 revisao", "S7@7 aprovacao"}, e.effects(k))
	e.requireObject(k, "aprovacao", 7)
	require.Equal(t, []string{"S7 held 7/5", "S4 stale 4/7"}, e.auditLines(k))
	e.requireNothingParked()
}

// a key blocked longer than MaxBlock is released by Sweep with a gap.
func ordMaxBlock(t *testing.T, open Factory) {
	const k, other = "PED-1015", "PED-1016"
	t.Run("DeadLetterBlock", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.MaxBlock = 10 * time.Minute })
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		require.Equal(t, []string{"E2:dead_lettered"}, ordSummary(e.deliver(c, ordEvent("E2", k, 2, "x", ordFailPermanent()), 1)))
		require.Equal(t, []string{"E3:blocked"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
		e.deliver(c, ordEvent("O1", other, 1, "pedido_criado"), 1)

		e.clock.Advance(9 * time.Minute)
		results, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, results, "not blocked long enough yet")
		e.requireKey(k, ordV(1), true, 0, 1)

		e.clock.Advance(2 * time.Minute)
		results, err = c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"E3:applied"}, ordSummary(results))
		require.Equal(t, []string{"2-2 by max_block"}, e.gapLines(k))
		require.Contains(t, e.gaps(k)[0].Reason, "longer than MaxBlock 10m0s")
		all := e.deadLetters(true)
		require.Len(t, all, 1)
		require.Contains(t, all[0].Resolution, "max_block")
		require.Contains(t, e.logs.String(), "ALERT key blocked longer than MaxBlock")
		require.Contains(t, e.logs.String(), "key="+k)
		e.requireKey(k, ordV(3), false, 0, 0)
		e.requireObject(k, "pedido_pago", 3)
		require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago"}, e.effects(k))
		e.requireObject(other, "pedido_criado", 1)
		require.Empty(t, e.gapLines(other))
		require.Equal(t, []string{"E2 dead_lettered 2/1", "E3 blocked 3/1"}, e.auditLines(k))
		e.requireNothingParked()
	})

	t.Run("HoldExpiryBlock", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.MaxBlock = 10 * time.Minute })
		c := e.consumer()
		e.deliver(c, ordEvent("E1", k, 1, "pedido_criado"), 1)
		require.Equal(t, []string{"E3:held"}, ordSummary(e.deliver(c, ordEvent("E3", k, 3, "pedido_pago"), 1)))
		e.clock.Advance(2 * time.Minute)
		results, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, results)
		e.requireKey(k, ordV(1), true, 0, 1)
		e.clock.Advance(11 * time.Minute)
		results, err = c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"E3:applied"}, ordSummary(results))
		require.Equal(t, []string{"2-2 by max_block"}, e.gapLines(k))
		require.Contains(t, e.logs.String(), "ALERT key blocked longer than MaxBlock")
		e.requireObject(k, "pedido_pago", 3)
		require.Equal(t, []string{"E1@1 pedido_criado", "E3@3 pedido_pago"}, e.effects(k))
		require.Equal(t, []string{"E3 held 3/1"}, e.auditLines(k))
		e.requireNothingParked()
	})
}

// The seed's worked example: PED-4821 receives v1, v3, v2 and ends
// cancelled at version 3 under both gap policies.
func ordPED4821(t *testing.T, open Factory) {
	const k = "PED-4821"
	v1 := ordEvent("EVT-9001", k, 1, "pedido_criado", ordWithTime(time.Date(2026, 9, 25, 10, 0, 0, 0, time.UTC)))
	v3 := ordEvent("EVT-9087", k, 3, "pedido_cancelado", ordWithTime(time.Date(2026, 9, 25, 10, 3, 0, 0, time.UTC)),
		ordWithAttr("causationid", "CMD-7712"), ordWithAttr("publishedat", "2026-09-25T10:03:04Z"))
	v2 := ordEvent("EVT-9050", k, 2, "endereco_alterado", ordWithTime(time.Date(2026, 9, 25, 10, 5, 0, 0, time.UTC)))

	t.Run("GapPolicy=hold", func(t *testing.T) {
		e := ordSetup(t, open)
		c := e.consumer()
		require.Equal(t, []string{"EVT-9001:applied"}, ordSummary(e.deliver(c, v1, 1)))
		require.Equal(t, []string{"EVT-9087:held"}, ordSummary(e.deliver(c, v3, 1)))
		require.Equal(t, []string{"EVT-9050:applied", "EVT-9087:applied"}, ordSummary(e.deliver(c, v2, 1)))
		// The address change applied before the cancellation, as the source
		// ordered them; the order ends cancelled.
		require.Equal(t, []string{"EVT-9001@1 pedido_criado", "EVT-9050@2 endereco_alterado", "EVT-9087@3 pedido_cancelado"}, e.effects(k))
		e.requireObject(k, "pedido_cancelado", 3)
		require.Equal(t, []string{"EVT-9087 held 3/1"}, e.auditLines(k))
		require.Equal(t, []string{"EVT-9050:duplicate"}, ordSummary(e.deliver(c, v2, 2)))
		e.requireObject(k, "pedido_cancelado", 3)
		e.requireNothingParked()
	})

	t.Run("GapPolicy=advance", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.GapPolicy = seqbox.GapAdvance })
		c := e.consumer()
		require.Equal(t, []string{"EVT-9001:applied"}, ordSummary(e.deliver(c, v1, 1)))
		require.Equal(t, []string{"EVT-9087:applied"}, ordSummary(e.deliver(c, v3, 1)))
		results := e.deliver(c, v2, 1)
		require.Equal(t, []string{"EVT-9050:stale"}, ordSummary(results), "the late address change must not reopen a cancelled order")
		require.Equal(t, []string{"EVT-9001@1 pedido_criado", "EVT-9087@3 pedido_cancelado"}, e.effects(k), "v2 never applied")
		e.requireObject(k, "pedido_cancelado", 3)
		require.Equal(t, []string{"2-2 by gap_policy=advance"}, e.gapLines(k))
		// The seed's evidence: object, received 2, current 3, no next action.
		require.Equal(t, []string{"EVT-9050 stale 2/3"}, e.auditLines(k))
		a := e.auditRow(k, "EVT-9050", seqboxtype.Stale)
		require.Equal(t, ordSource, a.Source)
		require.Contains(t, a.Reason, "version 2 is older than the committed version 3")
		require.Contains(t, a.NextAction, "none")
		// Never retried: redelivered, it is a duplicate with still no effect.
		require.Equal(t, []string{"EVT-9050:duplicate"}, ordSummary(e.deliver(c, v2, 2)))
		require.Len(t, e.effects(k), 2)
		e.requireNothingParked()
	})
}

// The seed's follow-up example: 41, 42, 43, then 41 republished under a
// new id must not create a new task.
func ordOpportunity(t *testing.T, open Factory) {
	const k = "OPP-2481"
	for _, gp := range []seqbox.GapPolicy{seqbox.GapHold, seqbox.GapAdvance} {
		t.Run("GapPolicy="+string(gp), func(t *testing.T) {
			e := ordSetup(t, open, func(c *seqbox.Config) { c.GapPolicy = gp })
			c := e.consumer()
			src := ordWithSource("crm")
			raw41 := ordEvent("EVT-41", k, 41, "proposta_enviada", src)
			require.Equal(t, []string{"EVT-41:applied"}, ordSummary(e.deliver(c, raw41, 1)), "41 is the key's baseline")
			require.Equal(t, []string{"EVT-42:applied"}, ordSummary(e.deliver(c, ordEvent("EVT-42", k, 42, "cliente_respondeu", src), 1)))
			require.Equal(t, []string{"EVT-43:applied"}, ordSummary(e.deliver(c, ordEvent("EVT-43", k, 43, "oportunidade_ganha", src), 1)))

			results := e.deliver(c, ordEvent("EVT-41-R", k, 41, "proposta_enviada", src, ordWithAttr("publishedat", "2026-09-26T09:00:00Z")), 1)
			require.Equal(t, []string{"EVT-41-R:stale"}, ordSummary(results))
			require.Contains(t, results[0].Reason, "version 41 is older than the committed version 43")
			require.Equal(t, []string{"EVT-41:duplicate"}, ordSummary(e.deliver(c, raw41, 2)))

			require.Equal(t, []string{"EVT-41@41 proposta_enviada", "EVT-42@42 cliente_respondeu", "EVT-43@43 oportunidade_ganha"}, e.effects(k),
				"no new follow-up task: effects stay 3")
			e.requireObject(k, "oportunidade_ganha", 43)
			require.Equal(t, []string{"EVT-41-R stale 41/43"}, e.auditLines(k))
			require.Equal(t, 1, e.duplicates("EVT-41"))
			require.Empty(t, e.gapLines(k))
			e.requireNothingParked()
		})
	}
}
