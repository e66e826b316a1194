package drivertest

import (
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// testOperatorRecordWithEffectKeepsAnotherOwnersClaim: DecisionRecord
// with an Effect drops its Owner's claim and only that one, on the pool
// and in a transaction, as it does without an Effect. A decider whose
// claim ran out and was taken over records its call late (its call count
// is still the row's: the new owner has not called yet): its decision
// and its call's result are recorded, and the new owner's claim stays
// its own (a hand-made SQL mutant, the pool's statement on PostgreSQL
// dropping the claim of whoever held it, lived through every suite).
func testOperatorRecordWithEffectKeepsAnotherOwnersClaim(t *testing.T, st store.Store) {
	o := newOp(t, st)
	claim := func(id, owner string, now, until int) bool {
		t.Helper()
		c, err := o.op.DecisionClaim(o.ctx, store.DecisionClaimParams{Consumer: o.consumer, Source: "crm", ID: id, Owner: owner, Now: at(now), Until: at(until)})
		require.NoError(t, err)
		return c.Claimed
	}
	for _, where := range []string{"pool", "tx"} {
		key, id := o.consumer+"/"+where, where
		ok, err := o.op.EffectInsertPending(o.ctx, store.EffectInsertPendingParams{Consumer: o.consumer, Source: "crm", ID: id,
			Action: "a", IdempotencyKey: key, At: at(1), LeaseUntil: at(9)})
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, claim(id, "late", 1, 5), where)
		require.True(t, claim(id, "new", 6, 20), "%s: the late owner's claim ran out at 5", where)

		p := store.DecisionRecordParams{Consumer: o.consumer, Source: "crm", ID: id, Decision: []byte("d-" + id), PayloadHash: "h",
			At: at(7), Owner: "late", Effect: &store.EffectRecordParams{IdempotencyKey: key,
				From: []seqboxtype.Effect{seqboxtype.EffectPending, seqboxtype.EffectUncertain}, To: seqboxtype.EffectSucceeded,
				Ref: "ref-" + id, At: at(7), Calls: 1}}
		var d store.Decision
		if where == "pool" {
			d, err = o.op.DecisionRecord(o.ctx, p)
		} else {
			o.commit(func(e *txEnv) { d, err = e.tx.DecisionRecord(e.ctx, p) })
		}
		require.NoError(t, err, where)
		require.Equal(t, []byte("d-"+id), d.Value, where)
		row, err := o.op.EffectGet(o.ctx, key)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.EffectSucceeded, row.State, "%s: the late call's result is recorded", where)

		require.False(t, claim(id, "third", 8, 30), "%s: the new owner's claim is not the late owner's to drop", where)
		extended, err := o.op.DecisionClaimExtend(o.ctx, store.DecisionClaimParams{Consumer: o.consumer, Source: "crm", ID: id, Owner: "new", Now: at(8), Until: at(25)})
		require.NoError(t, err)
		require.True(t, extended, "%s: the new owner still holds it", where)
	}
}

// testDecisionClaimLiveEndsWhereATakeOverMay: a claim is alive until the
// instant another owner may take it over (DecisionClaim takes a claim
// whose expiry is at or before now) and not at that instant: a claim
// counted as alive while another owner takes it is two deciders at once
// for every check that waits on a live claim (the deadline's, the
// sweep's, keys release).
func testDecisionClaimLiveEndsWhereATakeOverMay(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	live := func(now int) bool {
		t.Helper()
		ok, err := e.tx.DecisionClaimLive(e.ctx, store.DecisionClaimParams{Consumer: e.consumer, Source: "crm", ID: "1", Now: at(now)})
		require.NoError(t, err)
		return ok
	}
	require.False(t, live(1), "no claim")
	c, err := e.tx.DecisionClaim(e.ctx, store.DecisionClaimParams{Consumer: e.consumer, Source: "crm", ID: "1", Owner: "a", Now: at(1), Until: at(5)})
	require.NoError(t, err)
	require.True(t, c.Claimed)
	require.True(t, live(4), "before its expiry")
	require.False(t, live(5), "at its expiry: another owner may take it")
	c, err = e.tx.DecisionClaim(e.ctx, store.DecisionClaimParams{Consumer: e.consumer, Source: "crm", ID: "1", Owner: "b", Now: at(5), Until: at(9)})
	require.NoError(t, err)
	require.True(t, c.Claimed, "taken over at the instant it stopped being alive")
	require.True(t, live(5), "b's claim")
}

// testDecisionClaimManyLeavesALiveClaimEndingFirst: DecisionClaimMany
// takes over a claim only once it has run out at Now, not one still
// alive that would end before the new claim's Until. A hand-made SQL
// mutant comparing the held claim's expiry with Until instead of Now
// failed only PostgreSQL's suite: the existing test's live claims all
// ended after the new Until.
func testDecisionClaimManyLeavesALiveClaimEndingFirst(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	c, err := e.tx.DecisionClaim(e.ctx, store.DecisionClaimParams{Consumer: e.consumer, Source: "crm", ID: "1", Owner: "other", Now: at(1), Until: at(7)})
	require.NoError(t, err)
	require.True(t, c.Claimed)
	claimed, err := e.tx.DecisionClaimMany(e.ctx, store.DecisionClaimManyParams{Consumer: e.consumer, Owner: "me", Now: at(5), Until: at(8),
		IDs: []store.Identity{{Source: "crm", ID: "1"}, {Source: "crm", ID: "2"}}})
	require.NoError(t, err)
	require.Equal(t, map[store.Identity]bool{{Source: "crm", ID: "2"}: true}, claimed, "other's claim on 1 is alive until 7")
	extended, err := e.tx.DecisionClaimExtend(e.ctx, store.DecisionClaimParams{Consumer: e.consumer, Source: "crm", ID: "1", Owner: "other", Now: at(5), Until: at(9)})
	require.NoError(t, err)
	require.True(t, extended, "still other's")
}
