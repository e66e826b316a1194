package drivertest

import (
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// effectTests cover the effects ledger's methods, each in its own
// transaction.
var effectTests = []driverTest{
	{"EffectInsertPendingAndGet", testEffectInsertPending},
	{"EffectTransition", testEffectTransition},
	{"EffectRecord", testEffectRecord},
	{"EffectRenewLease", testEffectRenewLease},
	{"EffectList", testEffectList},
	{"EffectCountUncertain", testEffectCountUncertain},
	{"LedgerTouched", testLedgerTouched},
	{"LedgerOpen", testLedgerOpen},
	{"EffectByCall", testEffectByCall},
}

// testLedgerTouched: an identity's row pending, uncertain or succeeded
// says a call of it took effect or may have; a failed one, another
// identity's or another consumer's does not.
func testLedgerTouched(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	touched := func(consumer, id string) bool {
		t.Helper()
		ok, err := e.tx.LedgerTouched(e.ctx, store.MessageRef{Consumer: consumer, Source: "s", ID: id})
		require.NoError(t, err)
		return ok
	}
	require.False(t, touched(e.consumer, "1"), "no row")
	key := e.insertEffect("a", 1)
	require.True(t, touched(e.consumer, "1"), "pending")
	require.False(t, touched(e.consumer, "2"), "another identity's row")
	require.False(t, touched(e.consumer+"-other", "1"), "another consumer's row")
	for _, tc := range []struct {
		to   seqboxtype.Effect
		want bool
	}{{seqboxtype.EffectUncertain, true}, {seqboxtype.EffectFailed, false}, {seqboxtype.EffectSucceeded, true}} {
		require.NoError(t, e.tx.EffectRecord(e.ctx, store.EffectRecordParams{IdempotencyKey: key, To: tc.to, At: at(2),
			From: []seqboxtype.Effect{seqboxtype.EffectPending, seqboxtype.EffectUncertain, seqboxtype.EffectFailed}}))
		require.Equal(t, tc.want, touched(e.consumer, "1"), "%s", tc.to)
	}
}

// insertEffect inserts a pending row of action for the test's consumer,
// keyed consumer/action, at at(n) with a lease to at(n+3).
func (e *txEnv) insertEffect(action string, n int) string {
	e.t.Helper()
	key := e.consumer + "/" + action
	ok, err := e.tx.EffectInsertPending(e.ctx, store.EffectInsertPendingParams{Consumer: e.consumer, Source: "s", ID: "1",
		Action: action, IdempotencyKey: key, At: at(n), LeaseUntil: at(n + 3)})
	require.NoError(e.t, err)
	require.True(e.t, ok)
	return key
}

// effect reads the row of key, which must exist.
func (e *txEnv) effect(key string) store.EffectRow {
	e.t.Helper()
	r, err := e.tx.EffectGet(e.ctx, key)
	require.NoError(e.t, err)
	return r
}

func testEffectInsertPending(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	_, err := e.tx.EffectGet(e.ctx, e.consumer+"/none")
	require.ErrorIs(t, err, store.ErrNotFound)
	key := e.insertEffect("crm.create", 1)
	require.Equal(t, store.EffectRow{Consumer: e.consumer, Source: "s", ID: "1", Action: "crm.create", IdempotencyKey: key,
		State: seqboxtype.EffectPending, Calls: 1, CreatedAt: at(1), UpdatedAt: at(1), LeaseUntil: ptr(at(4))}, e.effect(key))
	ok, err := e.tx.EffectInsertPending(e.ctx, store.EffectInsertPendingParams{Consumer: e.consumer, Source: "s", ID: "1",
		Action: "crm.create", IdempotencyKey: key, At: at(9), LeaseUntil: at(9)})
	require.NoError(t, err)
	require.False(t, ok, "the row exists: the first stays")
	require.Equal(t, at(1), e.effect(key).CreatedAt)
}

func testEffectTransition(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	key := e.insertEffect("a", 1)
	ok, err := e.tx.EffectTransition(e.ctx, store.EffectTransitionParams{IdempotencyKey: key, From: seqboxtype.EffectFailed,
		To: seqboxtype.EffectPending, At: at(2), LeaseUntil: at(5)})
	require.NoError(t, err)
	require.False(t, ok, "not in From")
	ok, err = e.tx.EffectTransition(e.ctx, store.EffectTransitionParams{IdempotencyKey: key, From: seqboxtype.EffectPending,
		To: seqboxtype.EffectFailed, At: at(2)})
	require.NoError(t, err)
	require.True(t, ok)
	r := e.effect(key)
	require.Equal(t, seqboxtype.EffectFailed, r.State)
	require.Equal(t, 1, r.Calls)
	require.Equal(t, at(2), r.UpdatedAt)
	ok, err = e.tx.EffectTransition(e.ctx, store.EffectTransitionParams{IdempotencyKey: key, From: seqboxtype.EffectFailed,
		To: seqboxtype.EffectPending, At: at(3), LeaseUntil: at(9)})
	require.NoError(t, err)
	require.True(t, ok)
	r = e.effect(key)
	require.Equal(t, 2, r.Calls, "a move to pending counts a call")
	require.Equal(t, ptr(at(9)), r.LeaseUntil)
	// A move to another state than pending is guarded by From too.
	ok, err = e.tx.EffectTransition(e.ctx, store.EffectTransitionParams{IdempotencyKey: key, From: seqboxtype.EffectUncertain,
		To: seqboxtype.EffectFailed, At: at(4)})
	require.NoError(t, err)
	require.False(t, ok, "pending, not uncertain: not in From")
	require.Equal(t, seqboxtype.EffectPending, e.effect(key).State)
}

func testEffectRecord(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	key := e.insertEffect("a", 1)
	record := func(to seqboxtype.Effect, n int, reconciled bool, from ...seqboxtype.Effect) {
		require.NoError(t, e.tx.EffectRecord(e.ctx, store.EffectRecordParams{IdempotencyKey: key, From: from, To: to,
			Ref: "ref-" + string(to), LastError: "err-" + string(to), At: at(n), Reconciled: reconciled}))
	}
	record(seqboxtype.EffectSucceeded, 2, false, seqboxtype.EffectFailed)
	require.Equal(t, seqboxtype.EffectPending, e.effect(key).State, "not in From: left alone")
	// With Calls, the write is that call's own, and a row it leaves alone
	// says so.
	other := store.EffectRecordParams{IdempotencyKey: key, From: []seqboxtype.Effect{seqboxtype.EffectPending},
		To: seqboxtype.EffectSucceeded, At: at(2), Calls: 2}
	require.ErrorIs(t, e.tx.EffectRecord(e.ctx, other), store.ErrNotFound, "the row made one call, not two")
	require.Equal(t, seqboxtype.EffectPending, e.effect(key).State, "another call's answer: left alone")
	other.From = []seqboxtype.Effect{seqboxtype.EffectFailed}
	other.Calls = 1
	require.ErrorIs(t, e.tx.EffectRecord(e.ctx, other), store.ErrNotFound, "not in From")
	record(seqboxtype.EffectUncertain, 2, false, seqboxtype.EffectPending)
	record(seqboxtype.EffectUncertain, 3, false, seqboxtype.EffectUncertain)
	r := e.effect(key)
	require.Equal(t, seqboxtype.EffectUncertain, r.State)
	require.Equal(t, ptr(at(2)), r.UncertainAt, "the first time it turned uncertain stays")
	require.Equal(t, "err-uncertain", r.LastError)
	require.Nil(t, r.ReconciledAt)
	record(seqboxtype.EffectSucceeded, 4, true, seqboxtype.EffectPending, seqboxtype.EffectUncertain)
	r = e.effect(key)
	require.Equal(t, seqboxtype.EffectSucceeded, r.State)
	require.Equal(t, "ref-succeeded", r.Ref)
	require.Equal(t, at(4), r.UpdatedAt)
	require.Equal(t, ptr(at(4)), r.ReconciledAt)
}

func testEffectRenewLease(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	key := e.insertEffect("a", 1)
	require.NoError(t, e.tx.EffectRenewLease(e.ctx, store.EffectRenewLeaseParams{IdempotencyKey: key, Until: at(8)}))
	require.Equal(t, ptr(at(8)), e.effect(key).LeaseUntil)
	require.NoError(t, e.tx.EffectRecord(e.ctx, store.EffectRecordParams{IdempotencyKey: key, From: []seqboxtype.Effect{seqboxtype.EffectPending},
		To: seqboxtype.EffectSucceeded, At: at(2)}))
	require.NoError(t, e.tx.EffectRenewLease(e.ctx, store.EffectRenewLeaseParams{IdempotencyKey: key, Until: at(20)}))
	require.Equal(t, ptr(at(8)), e.effect(key).LeaseUntil, "a row no longer pending keeps its lease")
}

func testEffectList(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	live := e.insertEffect("live", 10) // lease to at(13)
	dead := e.insertEffect("dead", 1)  // lease to at(4)
	done := e.insertEffect("done", 2)  // succeeded below
	require.NoError(t, e.tx.EffectRecord(e.ctx, store.EffectRecordParams{IdempotencyKey: done,
		From: []seqboxtype.Effect{seqboxtype.EffectPending}, To: seqboxtype.EffectSucceeded, At: at(5)}))
	keys := func(p store.EffectListParams) []string {
		p.Consumer, p.Now = e.consumer, at(6)
		if p.Limit == 0 {
			p.Limit = 10
		}
		rows, err := e.tx.EffectList(e.ctx, p)
		require.NoError(t, err)
		var out []string
		for _, r := range rows {
			out = append(out, r.IdempotencyKey)
		}
		return out
	}
	require.Equal(t, []string{dead, done, live}, keys(store.EffectListParams{}), "oldest change first")
	require.Equal(t, []string{dead}, keys(store.EffectListParams{Limit: 1}))
	require.Equal(t, []string{live}, keys(store.EffectListParams{State: seqboxtype.EffectPending}))
	require.Equal(t, []string{dead}, keys(store.EffectListParams{State: seqboxtype.EffectUncertain}), "a pending row whose lease ran out")
	require.Equal(t, []string{done}, keys(store.EffectListParams{State: seqboxtype.EffectSucceeded}))
	require.Equal(t, []string{done}, keys(store.EffectListParams{Action: "done"}))
	require.Empty(t, keys(store.EffectListParams{State: seqboxtype.EffectFailed}))
}

func testEffectCountUncertain(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	e.insertEffect("live", 10)
	e.insertEffect("dead", 1)
	un := e.insertEffect("un", 2)
	require.NoError(t, e.tx.EffectRecord(e.ctx, store.EffectRecordParams{IdempotencyKey: un,
		From: []seqboxtype.Effect{seqboxtype.EffectPending}, To: seqboxtype.EffectUncertain, At: at(3)}))
	counts, err := e.tx.EffectCountUncertain(e.ctx, at(6))
	require.NoError(t, err)
	var mine []store.EffectUncertainCount
	for _, c := range counts {
		if c.Consumer == e.consumer {
			mine = append(mine, c)
		}
	}
	require.Equal(t, []store.EffectUncertainCount{
		{Consumer: e.consumer, Action: "dead", Count: 1, Oldest: at(1)},
		{Consumer: e.consumer, Action: "un", Count: 1, Oldest: at(3)},
	}, mine)
}

// testEffectByCall: writes naming their row by its call (identity and
// action) find it in every state, succeeded included, but only under its
// own key; EffectGetCall reads it so, and EffectGet by key finds an open
// call and a succeeded one alike.
func testEffectByCall(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	key := e.insertEffect("a", 1)
	call := store.EffectCall{Consumer: e.consumer, Source: "s", ID: "1", Action: "a"}
	get := func() store.EffectRow {
		t.Helper()
		r, err := e.tx.EffectGetCall(e.ctx, call)
		require.NoError(t, err)
		byKey, err := e.tx.EffectGet(e.ctx, key)
		require.NoError(t, err)
		require.Equal(t, r, byKey)
		return r
	}
	require.NoError(t, e.tx.EffectRenewLease(e.ctx, store.EffectRenewLeaseParams{Call: call, IdempotencyKey: key, Until: at(9)}))
	require.Equal(t, at(9), *get().LeaseUntil)
	require.NoError(t, e.tx.EffectRecord(e.ctx, store.EffectRecordParams{Call: call, IdempotencyKey: key, To: seqboxtype.EffectSucceeded,
		Ref: "r1", At: at(2), From: []seqboxtype.Effect{seqboxtype.EffectPending}, Calls: 1}))
	require.Equal(t, seqboxtype.EffectSucceeded, get().State)
	// A succeeded row is written again by its call (a note on a refused
	// late answer keeps its state).
	require.NoError(t, e.tx.EffectRecord(e.ctx, store.EffectRecordParams{Call: call, IdempotencyKey: key, To: seqboxtype.EffectSucceeded,
		Ref: "r1", LastError: "note", At: at(3), From: []seqboxtype.Effect{seqboxtype.EffectSucceeded}}))
	require.Equal(t, "note", get().LastError)
	// Under another key, the call's row is left alone.
	err := e.tx.EffectRecord(e.ctx, store.EffectRecordParams{Call: call, IdempotencyKey: key + "-other", To: seqboxtype.EffectFailed,
		At: at(4), From: []seqboxtype.Effect{seqboxtype.EffectSucceeded}, Calls: 1})
	require.ErrorIs(t, err, store.ErrNotFound)
	moved, err := e.tx.EffectTransition(e.ctx, store.EffectTransitionParams{Call: call, IdempotencyKey: key + "-other",
		From: seqboxtype.EffectSucceeded, To: seqboxtype.EffectPending, At: at(4), LeaseUntil: at(7)})
	require.NoError(t, err)
	require.False(t, moved)
	require.Equal(t, "r1", get().Ref)
	_, err = e.tx.EffectGetCall(e.ctx, store.EffectCall{Consumer: e.consumer, Source: "s", ID: "1", Action: "b"})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = e.tx.EffectGet(e.ctx, key+"-none")
	require.ErrorIs(t, err, store.ErrNotFound)
}
