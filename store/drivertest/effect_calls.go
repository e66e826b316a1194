package drivertest

import (
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// testOperatorLateAnswerOfAnEarlierCall: a call's answer is recorded only
// on its own call's row (docs/design.md §11, "An operator's resolution
// stands"). The first call's caller was taken for dead (its row went
// uncertain) and the row was called again (pending, two calls); the first
// caller's late answer, naming call 1, changes nothing, whether written
// alone (EffectRecord: store.ErrNotFound) or with its decision
// (DecisionRecord: store.ErrEffectChanged, and no decision, and its
// owner's claim kept), on the pool and in a transaction; the second
// call's answer is recorded. A hand-made SQL mutant that compared the
// row's count with `>=` (a later call's row took an earlier call's
// answer) lived through every suite before this test: they only sent an
// answer naming a call the row had not reached.
func testOperatorLateAnswerOfAnEarlierCall(t *testing.T, st store.Store) {
	o := newOp(t, st)
	for _, where := range []string{"pool", "tx"} {
		key, id := o.consumer+"/"+where, where
		ok, err := o.op.EffectInsertPending(o.ctx, store.EffectInsertPendingParams{Consumer: o.consumer, Source: "crm", ID: id,
			Action: "a", IdempotencyKey: key, At: at(1), LeaseUntil: at(2)})
		require.NoError(t, err)
		require.True(t, ok)
		for _, step := range []struct{ from, to seqboxtype.Effect }{
			{seqboxtype.EffectPending, seqboxtype.EffectUncertain}, // its caller taken for dead
			{seqboxtype.EffectUncertain, seqboxtype.EffectPending}, // called again: call 2
		} {
			moved, err := o.op.EffectTransition(o.ctx, store.EffectTransitionParams{IdempotencyKey: key, From: step.from, To: step.to, At: at(3), LeaseUntil: at(9)})
			require.NoError(t, err)
			require.True(t, moved, "%s: %s to %s", where, step.from, step.to)
		}
		c, err := o.op.DecisionClaim(o.ctx, store.DecisionClaimParams{Consumer: o.consumer, Source: "crm", ID: id, Owner: "first", Now: at(3), Until: at(20)})
		require.NoError(t, err)
		require.True(t, c.Claimed)

		answer := func(calls int, ref string) store.EffectRecordParams {
			return store.EffectRecordParams{IdempotencyKey: key, From: []seqboxtype.Effect{seqboxtype.EffectPending, seqboxtype.EffectUncertain},
				To: seqboxtype.EffectSucceeded, Ref: ref, At: at(4), Calls: calls}
		}
		decision := store.DecisionRecordParams{Consumer: o.consumer, Source: "crm", ID: id, Decision: []byte("late"), PayloadHash: "h",
			At: at(4), Owner: "first", Effect: ptr(answer(1, "late-ref"))}
		var recordErr, decisionErr error
		if where == "pool" {
			recordErr = o.op.EffectRecord(o.ctx, answer(1, "late-ref"))
			_, decisionErr = o.op.DecisionRecord(o.ctx, decision)
		} else {
			o.commit(func(e *txEnv) { recordErr = e.tx.EffectRecord(e.ctx, answer(1, "late-ref")) })
			o.commit(func(e *txEnv) { _, decisionErr = e.tx.DecisionRecord(e.ctx, decision) })
		}
		require.ErrorIs(t, recordErr, store.ErrNotFound, "%s: call 1's answer on call 2's row", where)
		require.ErrorIs(t, decisionErr, store.ErrEffectChanged, "%s: call 1's answer with its decision", where)
		row, err := o.op.EffectGet(o.ctx, key)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.EffectPending, row.State, "%s: call 2 is still in flight", where)
		require.Equal(t, 2, row.Calls, where)
		require.Empty(t, row.Ref, where)
		_, err = o.op.DecisionGet(o.ctx, store.MessageRef{Consumer: o.consumer, Source: "crm", ID: id})
		require.ErrorIs(t, err, store.ErrNotFound, "%s: no decision made from call 1's answer", where)
		c, err = o.op.DecisionClaim(o.ctx, store.DecisionClaimParams{Consumer: o.consumer, Source: "crm", ID: id, Owner: "other", Now: at(5), Until: at(9)})
		require.NoError(t, err)
		require.False(t, c.Claimed, "%s: the claim is kept", where)

		require.NoError(t, o.op.EffectRecord(o.ctx, answer(2, "ref-2")), "%s: call 2's own answer", where)
		row, err = o.op.EffectGet(o.ctx, key)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.EffectSucceeded, row.State, where)
		require.Equal(t, "ref-2", row.Ref, where)
	}
}
