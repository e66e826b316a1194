package drivertest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// operatorTests call the store.Executor methods, and the commit and
// Within paths, on rows they commit under a consumer of their own.
var operatorTests = []driverTest{
	{"CommitKeepsRollbackForgets", testCommit},
	{"Within", testWithin},
	{"DeadLetterList", testOperatorDeadLetters},
	{"Keys", testOperatorKeys},
	{"Parked", testOperatorParked},
	{"Audit", testOperatorAudit},
	{"GatewayEnvelopePurge", testOperatorGatewayPurge},
	{"Gaps", testOperatorGaps},
	{"Counts", testOperatorCounts},
	{"ParkedListDue", testOperatorDueHolds},
	{"DueHoldsOnePerKeyOnTies", testOperatorDueHoldsTies},
	{"KeyListBlockedBefore", testOperatorBlockedBefore},
	{"SeenAndKeyVersion", testOperatorSeen},
	{"DecisionGet", testOperatorDecision},
	{"DecisionClaim", testOperatorClaimDecision},
	{"DecisionRecordDropsItsClaim", testOperatorRecordDropsClaim},
	{"DecisionRecordWithItsEffect", testOperatorRecordWithEffect},
	{"DecisionRecordWithItsEffectKeepsAnotherOwnersClaim", testOperatorRecordWithEffectKeepsAnotherOwnersClaim},
	{"LateAnswerOfAnEarlierCall", testOperatorLateAnswerOfAnEarlierCall},
	{"InboxPurge", testOperatorPurgeInbox},
	{"InboxPurgeFrom", testOperatorPurgeInboxFrom},
	{"InboxPurgeDependents", testOperatorPurgeInboxDependents},
	{"ParkedListDueTiesBySeq", testOperatorDueHoldsTieBySeq},
}

// opEnv is one Operator or Control test: its consumer name, which no
// other test uses, and the store, whose pool it reads through.
type opEnv struct {
	t        *testing.T
	ctx      context.Context
	st       store.Store
	op       store.Executor
	consumer string
}

// newOp marks t parallel and names its consumer.
func newOp(t *testing.T, st store.Store) *opEnv {
	t.Helper()
	return &opEnv{t: t, ctx: testContext(t), st: st, op: st.Executor(), consumer: "op:" + t.Name()}
}

// commit runs fn in a batch transaction of the test's consumer and
// commits it. The transaction is rolled back if fn fails the test, so the
// writer's turn is never kept.
func (o *opEnv) commit(fn func(e *txEnv)) {
	o.t.Helper()
	tx, err := o.st.Begin(o.ctx)
	require.NoError(o.t, err)
	defer func() {
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			o.t.Errorf("rollback: %v", err)
		}
	}()
	fn(&txEnv{t: o.t, ctx: o.ctx, st: o.st, tx: tx, consumer: o.consumer})
	require.NoError(o.t, tx.Commit())
}

// seen reports whether the test's consumer recorded an identity, through
// the pool.
func (o *opEnv) seen(id string) bool {
	o.t.Helper()
	return o.seenBy(o.consumer, id)
}

// seenBy reports whether consumer recorded identity crm/id, read on the
// pool.
func (o *opEnv) seenBy(consumer, id string) bool {
	o.t.Helper()
	_, err := o.op.InboxSeen(o.ctx, store.MessageRef{Consumer: consumer, Source: "crm", ID: id})
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	require.NoError(o.t, err)
	return true
}

// Commit makes the batch visible to the pool; Rollback forgets it. Both
// give the writer's turn back, and a finished transaction stays finished.
func testCommit(t *testing.T, st store.Store) {
	o := newOp(t, st)
	tx, err := st.Begin(o.ctx)
	require.NoError(t, err)
	e := &txEnv{t: t, ctx: o.ctx, st: st, tx: tx, consumer: o.consumer}
	_, err = tx.InboxInsert(o.ctx, e.inboxRow("crm", "1", 1))
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	require.ErrorIs(t, tx.Commit(), sql.ErrTxDone)
	require.ErrorIs(t, tx.Rollback(), sql.ErrTxDone)
	require.True(t, o.seen("1"))

	tx, err = st.Begin(o.ctx)
	require.NoError(t, err)
	e.tx = tx
	_, err = tx.InboxInsert(o.ctx, e.inboxRow("crm", "2", 2))
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	require.ErrorIs(t, tx.Commit(), sql.ErrTxDone)
	require.False(t, o.seen("2"))
}

// Within runs the store's methods in the caller's transaction: its
// rollback forgets them, its commit keeps them.
func testWithin(t *testing.T, st store.Store) {
	o := newOp(t, st)
	for _, commit := range []bool{false, true} {
		sqlTx, err := st.DB().BeginTx(o.ctx, nil)
		require.NoError(t, err)
		tx := st.UnwrapTx(sqlTx)
		require.Same(t, sqlTx, tx.SQL())
		e := &txEnv{t: t, ctx: o.ctx, st: st, tx: tx, consumer: o.consumer}
		ok, err := tx.InboxInsert(o.ctx, e.inboxRow("crm", "1", 1))
		require.NoError(t, err)
		require.True(t, ok, "commit=%v", commit)
		require.NoError(t, tx.KeyEnsure(o.ctx, store.KeyEnsureParams{Consumer: o.consumer, Key: "order-1", At: at(1)}))
		won, err := tx.KeyAdvance(o.ctx, store.KeyAdvanceParams{Consumer: o.consumer, Key: "order-1", Prev: nil, Next: 3, At: at(2)})
		require.NoError(t, err)
		require.True(t, won)
		if commit {
			require.NoError(t, sqlTx.Commit())
		} else {
			require.NoError(t, sqlTx.Rollback())
		}
		require.Equal(t, commit, o.seen("1"), "commit=%v", commit)
		v, err := o.op.KeyVersion(o.ctx, store.KeyRef{Consumer: o.consumer, Key: "order-1"})
		require.NoError(t, err)
		if commit {
			require.Equal(t, ptr(int64(3)), v)
		} else {
			require.Nil(t, v)
		}
	}
}

// DeadLetterList lists the open rows, or every row, oldest first, each as
// it was stored; DeadLetter reads one of the consumer's rows.
func testOperatorDeadLetters(t *testing.T, st store.Store) {
	o := newOp(t, st)
	d1, d2, d3 := deadLetter(o.consumer, "1", 1), deadLetter(o.consumer, "2", 2), deadLetter(o.consumer, "3", 3)
	d2.ObjectVersion = nil
	o.commit(func(e *txEnv) {
		for _, d := range []*store.DeadLetter{&d1, &d2, &d3} {
			seq, err := e.tx.DeadLetterInsert(e.ctx, *d)
			require.NoError(t, err)
			d.Seq, d.State = seq, seqboxtype.DeadLetterOpen
		}
	})
	o.commit(func(e *txEnv) {
		require.NoError(t, e.tx.DeadLetterResolve(e.ctx, store.DeadLetterResolveParams{Consumer: o.consumer, Seq: d2.Seq, State: seqboxtype.DeadLetterSkipped, Resolution: "skipped by ana: obsolete", At: at(50)}))
	})
	d2.State, d2.Resolution, d2.ResolvedAt = seqboxtype.DeadLetterSkipped, "skipped by ana: obsolete", ptr(at(50))

	open, err := o.op.DeadLetterList(o.ctx, store.DeadLetterListParams{Consumer: o.consumer, All: false})
	require.NoError(t, err)
	require.Equal(t, []store.DeadLetter{d1, d3}, open)
	all, err := o.op.DeadLetterList(o.ctx, store.DeadLetterListParams{Consumer: o.consumer, All: true})
	require.NoError(t, err)
	require.Equal(t, []store.DeadLetter{d1, d2, d3}, all)
	// Pages: Limit rows in Seq order, the next After the last one's Seq.
	page, err := o.op.DeadLetterList(o.ctx, store.DeadLetterListParams{Consumer: o.consumer, All: true, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []store.DeadLetter{d1, d2}, page)
	page, err = o.op.DeadLetterList(o.ctx, store.DeadLetterListParams{Consumer: o.consumer, All: true, After: d2.Seq, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []store.DeadLetter{d3}, page)
	page, err = o.op.DeadLetterList(o.ctx, store.DeadLetterListParams{Consumer: o.consumer, After: d1.Seq, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, []store.DeadLetter{d3}, page, "open rows after d1: d2 is skipped")
	_, err = o.op.DeadLetterList(o.ctx, store.DeadLetterListParams{Consumer: o.consumer, Limit: -1})
	require.Error(t, err, "a negative limit")
	// One identity's rows, by its index.
	one, err := o.op.DeadLetterList(o.ctx, store.DeadLetterListParams{Consumer: o.consumer, All: true, Of: &store.Identity{Source: "crm", ID: "2"}})
	require.NoError(t, err)
	require.Equal(t, []store.DeadLetter{d2}, one)
	one, err = o.op.DeadLetterList(o.ctx, store.DeadLetterListParams{Consumer: o.consumer, Of: &store.Identity{Source: "crm", ID: "2"}})
	require.NoError(t, err)
	require.Empty(t, one, "its row is resolved")
	one, err = o.op.DeadLetterList(o.ctx, store.DeadLetterListParams{Consumer: o.consumer, All: true, Of: &store.Identity{Source: "erp", ID: "2"}})
	require.NoError(t, err)
	require.Empty(t, one, "another source's id")
	for _, letter := range all {
		got, err := o.op.DeadLetterGet(o.ctx, store.DeadLetterRef{Consumer: o.consumer, Seq: letter.Seq})
		require.NoError(t, err)
		require.Equal(t, letter, got)
	}
	_, err = o.op.DeadLetterGet(o.ctx, store.DeadLetterRef{Consumer: o.consumer + "/other", Seq: d1.Seq})
	require.ErrorIs(t, err, store.ErrNotFound, "another consumer's row")
	_, err = o.op.DeadLetterGet(o.ctx, store.DeadLetterRef{Consumer: o.consumer, Seq: d3.Seq + 1_000_000})
	require.ErrorIs(t, err, store.ErrNotFound)
	none, err := o.op.DeadLetterList(o.ctx, store.DeadLetterListParams{Consumer: o.consumer + "/other", All: true})
	require.NoError(t, err)
	require.Empty(t, none)
}

// Keys lists every key, or the stuck ones (blocked, or holding a held or
// blocked message), or those of a list, with what is parked behind each,
// in byte order of the key; Key reads one; KeyNameList names them all.
func testOperatorKeys(t *testing.T, st store.Store) {
	o := newOp(t, st)
	o.commit(func(e *txEnv) {
		ctx, tx := e.ctx, e.tx
		e.ensureKeys(at(0), "B-upper", "a-held", "b-blocked", "c-quiet", "d-collision", "e-gap", "é-accent")
		for key, v := range map[string]int64{"a-held": 2, "b-blocked": 5, "c-quiet": 7} {
			_, err := tx.KeyAdvance(ctx, store.KeyAdvanceParams{Consumer: o.consumer, Key: key, Prev: nil, Next: v, At: at(1)})
			require.NoError(t, err)
		}
		e.park(e.parked("a-held", "crm", "a4", ptr(int64(4)), seqboxtype.ParkHeld, 12))
		e.park(e.parked("a-held", "crm", "a3", ptr(int64(3)), seqboxtype.ParkHeld, 11))
		require.NoError(t, tx.KeyBlock(ctx, store.KeyBlockParams{Consumer: o.consumer, Key: "b-blocked", Source: "crm", ID: "b6", Reason: "boom", At: at(20)}))
		e.park(e.parked("b-blocked", "crm", "b6", ptr(int64(6)), seqboxtype.ParkBlocked, 21))
		e.park(e.parked("b-blocked", "crm", "b7", ptr(int64(7)), seqboxtype.ParkBlocked, 22))
		e.park(e.parked("b-blocked", "crm", "b1", ptr(int64(1)), seqboxtype.ParkCollision, 5))
		e.park(e.parked("d-collision", "crm", "d1", nil, seqboxtype.ParkCollision, 3))
		require.NoError(t, tx.KeyBlock(ctx, store.KeyBlockParams{Consumer: o.consumer, Key: "e-gap", Source: "", ID: "", Reason: "gap before 2", At: at(30)}))
		e.retry("c-quiet", "crm", "c8", "boom", 31) // no column of the view, but a stuck key: its head retries
	})
	ks := func(key string, version *int64, updated time.Time) store.KeyState {
		return store.KeyState{Consumer: o.consumer, Key: key, Version: version, Baseline: version, UpdatedAt: updated}
	}
	blocked := ks("b-blocked", ptr(int64(5)), at(20))
	blocked.Blocked, blocked.BlockedSource, blocked.BlockedID, blocked.BlockedReason, blocked.BlockedSince = true, "crm", "b6", "boom", at(20)
	gap := ks("e-gap", nil, at(30))
	gap.Blocked, gap.BlockedReason, gap.BlockedSince = true, "gap before 2", at(30)
	want := []store.KeyView{
		{KeyState: ks("B-upper", nil, at(0))},
		{KeyState: ks("a-held", ptr(int64(2)), at(1)), Held: 2, Parked: 2, OldestParked: at(11), NextVersion: ptr(int64(3))},
		{KeyState: blocked, BlockedCount: 2, Parked: 3, OldestParked: at(21), NextVersion: ptr(int64(6))},
		{KeyState: ks("c-quiet", ptr(int64(7)), at(1))},
		{KeyState: ks("d-collision", nil, at(0)), Parked: 1},
		{KeyState: gap},
		{KeyState: ks("é-accent", nil, at(0))},
	}
	all, err := o.op.KeyViewList(o.ctx, store.KeyViewListParams{Consumer: o.consumer, Stuck: false})
	require.NoError(t, err)
	require.Equal(t, want, all)
	stuck, err := o.op.KeyViewList(o.ctx, store.KeyViewListParams{Consumer: o.consumer, Stuck: true})
	require.NoError(t, err)
	require.Equal(t, []store.KeyView{want[1], want[2], want[3], want[5]}, stuck)
	some, err := o.op.KeyViewList(o.ctx, store.KeyViewListParams{Consumer: o.consumer, Keys: []string{"é-accent", "a-held", "c-quiet", "missing", "a-held"}})
	require.NoError(t, err)
	require.Equal(t, []store.KeyView{want[1], want[3], want[6]}, some, "only the keys named, in byte order")
	someStuck, err := o.op.KeyViewList(o.ctx, store.KeyViewListParams{Consumer: o.consumer, Stuck: true, Keys: []string{"a-held", "B-upper", "d-collision"}})
	require.NoError(t, err)
	require.Equal(t, []store.KeyView{want[1]}, someStuck, "the stuck ones of the keys named")
	names, err := o.op.KeyNameList(o.ctx, store.KeyNameListParams{Consumer: o.consumer})
	require.NoError(t, err)
	require.Equal(t, []string{"B-upper", "a-held", "b-blocked", "c-quiet", "d-collision", "e-gap", "é-accent"}, names, "every key's name, in byte order")
	names, err = o.op.KeyNameList(o.ctx, store.KeyNameListParams{Consumer: o.consumer + "/other"})
	require.NoError(t, err)
	require.Empty(t, names)
	for _, v := range want {
		got, err := o.op.KeyViewGet(o.ctx, store.KeyRef{Consumer: o.consumer, Key: v.Key})
		require.NoError(t, err)
		require.Equal(t, v, got)
	}
	for _, missing := range []string{"", "missing"} {
		_, err = o.op.KeyViewGet(o.ctx, store.KeyRef{Consumer: o.consumer, Key: missing})
		require.ErrorIs(t, err, store.ErrNotFound, "key %q", missing)
	}
	_, err = o.op.KeyViewGet(o.ctx, store.KeyRef{Consumer: o.consumer + "/other", Key: "a-held"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

// Parked lists a key's parked messages of every reason (all keys for an
// empty key), in version order and then arrival order; ParkedPage a page
// of one key's, from after a cursor.
func testOperatorParked(t *testing.T, st store.Store) {
	o := newOp(t, st)
	var want []store.Parked
	o.commit(func(e *txEnv) {
		ps := []store.Parked{
			e.parked("k", "crm", "held-2", ptr(int64(2)), seqboxtype.ParkHeld, 1),
			e.parked("k", "crm", "collision-1", ptr(int64(1)), seqboxtype.ParkCollision, 2),
			e.parked("k", "crm", "conflict", nil, seqboxtype.ParkVersionConflict, 3),
			e.parked("k", "crm", "blocked-2", ptr(int64(2)), seqboxtype.ParkBlocked, 4),
		}
		ps[0].HoldUntil = at(40)
		for _, p := range ps {
			e.park(p)
		}
		want = []store.Parked{ps[2], ps[1], ps[0], ps[3]}
		e.park(e.parked("l", "crm", "other-key", nil, seqboxtype.ParkHeld, 5))
	})
	got, err := o.op.ParkedList(o.ctx, store.KeyRef{Consumer: o.consumer, Key: "k"})
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range got {
		require.Positive(t, got[i].Seq)
		want[i].Seq = got[i].Seq
	}
	require.Equal(t, want, got)
	require.Less(t, got[2].Seq, got[3].Seq, "equal versions in arrival order")
	all, err := o.op.ParkedList(o.ctx, store.KeyRef{Consumer: o.consumer, Key: ""})
	require.NoError(t, err)
	require.Len(t, all, 5)
	require.Equal(t, want, all[:4])
	require.Equal(t, "other-key", all[4].ID)

	// The consumer's collisions, oldest first; one identity's parked
	// messages, every reason.
	cols, err := o.op.ParkedCollisionList(o.ctx, store.ParkedCollisionListParams{Consumer: o.consumer, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, want[1:2], cols)
	cols, err = o.op.ParkedCollisionList(o.ctx, store.ParkedCollisionListParams{Consumer: o.consumer + "/other", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, cols)
	mine, err := o.op.ParkedOfIdentity(o.ctx, store.MessageRef{Consumer: o.consumer, Source: "crm", ID: "held-2"})
	require.NoError(t, err)
	require.Equal(t, want[2:3], mine)
	mine, err = o.op.ParkedOfIdentity(o.ctx, store.MessageRef{Consumer: o.consumer, Source: "erp", ID: "held-2"})
	require.NoError(t, err)
	require.Empty(t, mine)

	// A page at a time, in the same order, from after a cursor.
	page, err := o.op.ParkedPage(o.ctx, store.ParkedPageParams{Consumer: o.consumer, Key: "k", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, want[:2], page)
	page, err = o.op.ParkedPage(o.ctx, store.ParkedPageParams{Consumer: o.consumer, Key: "k", Limit: 2, After: store.ParkedCursorOf(page[1])})
	require.NoError(t, err)
	require.Equal(t, want[2:], page)
	page, err = o.op.ParkedPage(o.ctx, store.ParkedPageParams{Consumer: o.consumer, Key: "k", Limit: 2, After: store.ParkedCursorOf(want[2])})
	require.NoError(t, err)
	require.Equal(t, want[3:], page, "after the first of two at one version: the second")
	page, err = o.op.ParkedPage(o.ctx, store.ParkedPageParams{Consumer: o.consumer, Key: "k", Limit: 2, After: store.ParkedCursorOf(want[3])})
	require.NoError(t, err)
	require.Empty(t, page)
	page, err = o.op.ParkedPage(o.ctx, store.ParkedPageParams{Consumer: o.consumer, Key: "k", Reason: seqboxtype.ParkHeld, Limit: 5})
	require.NoError(t, err)
	require.Equal(t, want[2:3], page, "of one reason")
	for _, bad := range []store.ParkedPageParams{{Consumer: o.consumer, Key: "k"}, {Consumer: o.consumer, Limit: 1}} {
		_, err = o.op.ParkedPage(o.ctx, bad)
		require.Error(t, err, "%+v", bad)
	}
}

// Audit lists the newest rows, at most limit, newest last, of a consumer
// or one of its keys.
func testOperatorAudit(t *testing.T, st store.Store) {
	o := newOp(t, st)
	var rows []store.AuditRow
	for i := range 5 {
		rows = append(rows, store.AuditRow{Consumer: o.consumer, Source: "crm", ID: fmt.Sprint(i),
			PartitionKey: fmt.Sprintf("k%d", i%2), ReceivedVersion: ptr(int64(i)), Outcome: "stale",
			Reason: fmt.Sprintf("reason %d", i), NextAction: "none", At: at(i)})
	}
	rows[4].ReceivedVersion, rows[4].CurrentVersion = nil, ptr(int64(9))
	o.commit(func(e *txEnv) {
		for _, a := range rows {
			require.NoError(t, e.tx.AuditInsert(e.ctx, a))
		}
		require.NoError(t, e.tx.AuditInsert(e.ctx, store.AuditRow{Consumer: o.consumer, Source: "crm", ID: "d",
			Outcome: seqboxtype.Duplicate, At: at(9)}))
	})
	list := func(key string, limit int) []store.AuditRow {
		t.Helper()
		got, err := o.op.AuditList(o.ctx, store.AuditListParams{Consumer: o.consumer, Key: key, Limit: limit})
		require.NoError(t, err)
		for i := range got {
			require.Positive(t, got[i].Seq)
			if i > 0 {
				require.Greater(t, got[i].Seq, got[i-1].Seq)
			}
			got[i].Seq = 0
		}
		return got
	}
	require.Equal(t, rows, list("", 10), "duplicates are not audit rows")
	require.Equal(t, rows[3:], list("", 2), "the newest, newest last")
	require.Equal(t, []store.AuditRow{rows[0], rows[2], rows[4]}, list("k0", 10))
	require.Equal(t, []store.AuditRow{rows[3]}, list("k1", 1))
	require.Empty(t, list("k2", 10))
}

// Gaps lists the recorded gaps of a key (every key for an empty key) in
// the order they were recorded.
func testOperatorGaps(t *testing.T, st store.Store) {
	o := newOp(t, st)
	gaps := []store.Gap{
		{Consumer: o.consumer, Key: "k", FromVersion: 2, ToVersion: 4, DecidedBy: "ana", Reason: "lost", At: at(1)},
		{Consumer: o.consumer, Key: "l", FromVersion: 1, ToVersion: 1, DecidedBy: "sweeper", Reason: "timeout", At: at(2)},
		{Consumer: o.consumer, Key: "k", FromVersion: 7, ToVersion: 9, DecidedBy: "bob", Reason: "again", At: at(3)},
	}
	o.commit(func(e *txEnv) {
		for _, g := range gaps {
			require.NoError(t, e.tx.GapInsert(e.ctx, g))
		}
	})
	got, err := o.op.GapList(o.ctx, store.KeyRef{Consumer: o.consumer, Key: "k"})
	require.NoError(t, err)
	require.Equal(t, []store.Gap{gaps[0], gaps[2]}, got)
	got, err = o.op.GapList(o.ctx, store.KeyRef{Consumer: o.consumer, Key: ""})
	require.NoError(t, err)
	require.Equal(t, gaps, got)
	got, err = o.op.GapList(o.ctx, store.KeyRef{Consumer: o.consumer, Key: "m"})
	require.NoError(t, err)
	require.Empty(t, got)
}

// Counts counts a consumer's rows of every kind; StuckCounts all but the
// inbox's and the keys'.
func testOperatorCounts(t *testing.T, st store.Store) {
	o := newOp(t, st)
	empty, err := o.op.Counts(o.ctx, o.consumer)
	require.NoError(t, err)
	require.Equal(t, store.Counts{}, empty)
	o.commit(func(e *txEnv) {
		for i, outcome := range []seqboxtype.Outcome{"applied", "applied", "applied", "rejected", "pending"} {
			r := e.inboxRow("crm", fmt.Sprint(i), i)
			r.Outcome = outcome
			_, err := e.tx.InboxInsert(e.ctx, r)
			require.NoError(t, err)
		}
		e.park(e.parked("k1", "crm", "h1", ptr(int64(1)), seqboxtype.ParkHeld, 20))
		e.park(e.parked("k1", "crm", "h2", ptr(int64(2)), seqboxtype.ParkHeld, 10))
		e.park(e.parked("k2", "crm", "b1", ptr(int64(1)), seqboxtype.ParkBlocked, 15))
		e.park(e.parked("k3", "crm", "c1", ptr(int64(1)), seqboxtype.ParkCollision, 1)) // oldest, but not stuck
		var seqs []int64
		for i := range 3 {
			seq, err := e.tx.DeadLetterInsert(e.ctx, deadLetter(o.consumer, fmt.Sprint(i), i))
			require.NoError(t, err)
			seqs = append(seqs, seq)
		}
		require.NoError(t, e.tx.DeadLetterResolve(e.ctx, store.DeadLetterResolveParams{Consumer: o.consumer, Seq: seqs[1], State: seqboxtype.DeadLetterRedriven, Resolution: "redriven", At: at(5)}))
		e.ensureKeys(at(0), "k1", "k2", "k3")
		require.NoError(t, e.tx.KeyBlock(e.ctx, store.KeyBlockParams{Consumer: o.consumer, Key: "k2", Source: "crm", ID: "b1", Reason: "boom", At: at(15)}))
		for i := range 2 {
			require.NoError(t, e.tx.GapInsert(e.ctx, store.Gap{Consumer: o.consumer, Key: "k1", FromVersion: int64(i), ToVersion: int64(i), DecidedBy: "ana", Reason: "r", At: at(i)}))
		}
	})
	got, err := o.op.Counts(o.ctx, o.consumer)
	require.NoError(t, err)
	require.Equal(t, store.Counts{
		InboxRows: 4, Applied: 3, Parked: 4, Held: 2, Blocked: 1, DeadLetters: 2, Keys: 3,
		BlockedKeys: 1, Gaps: 2, OldestStuck: at(10),
	}, got)
	stuck, err := o.op.StuckCounts(o.ctx, o.consumer)
	require.NoError(t, err)
	got.InboxRows, got.Applied, got.Keys = 0, 0, 0
	require.Equal(t, got, stuck, "StuckCounts is Counts without what reads every identity and key")

	// A key blocked with nothing parked behind it is stuck since it
	// blocked, and that is older than every parked message here.
	o.commit(func(e *txEnv) {
		e.ensureKeys(at(0), "k4")
		require.NoError(t, e.tx.KeyBlock(e.ctx, store.KeyBlockParams{Consumer: o.consumer, Key: "k4", Source: "crm", ID: "d1", Reason: "boom", At: at(5)}))
	})
	got, err = o.op.Counts(o.ctx, o.consumer)
	require.NoError(t, err)
	require.Equal(t, int64(2), got.BlockedKeys)
	require.Equal(t, at(5), got.OldestStuck, "the oldest stuck key is k4, blocked at 5")
}

// ParkedListDue lists, one per key, the held message of lowest version whose
// hold deadline has come (at or before now), by the time it was parked.
func testOperatorDueHolds(t *testing.T, st store.Store) {
	o := newOp(t, st)
	ps := map[string]store.Parked{}
	o.commit(func(e *txEnv) {
		add := func(key, id string, version *int64, reason seqboxtype.Park, parkedAt int, hold int) {
			p := e.parked(key, "crm", id, version, reason, parkedAt)
			if hold >= 0 {
				p.HoldUntil = at(hold)
			}
			ps[id] = e.parkOne(p)
		}
		add("a", "a5", ptr(int64(5)), seqboxtype.ParkHeld, 1, 10)
		add("a", "a3", ptr(int64(3)), seqboxtype.ParkHeld, 2, 20)
		add("b", "b", nil, seqboxtype.ParkHeld, 3, 15)
		add("c", "c1", ptr(int64(1)), seqboxtype.ParkHeld, 4, -1)   // no deadline: waits behind a retry
		add("d", "d1", ptr(int64(1)), seqboxtype.ParkBlocked, 5, 5) // blocked: no hold
		add("e", "e2", ptr(int64(2)), seqboxtype.ParkHeld, 0, 12)
		add("e", "e-nil", nil, seqboxtype.ParkHeld, 6, -1) // lower (no version), not due
	})
	other := store.Parked{Consumer: o.consumer + "/other", Source: "crm", ID: "x", PartitionKey: "b", Reason: seqboxtype.ParkHeld,
		Envelope: []byte("{}"), PayloadHash: "h", ParkedAt: at(0), HoldUntil: at(0)}
	o.commit(func(e *txEnv) { e.park(other) })
	due := func(now int) []string {
		t.Helper()
		got, err := o.op.ParkedListDue(o.ctx, store.ParkedListDueParams{Consumer: o.consumer, Now: at(now)})
		require.NoError(t, err)
		ids := []string{}
		for _, p := range got {
			require.Equal(t, ps[p.ID], p)
			ids = append(ids, p.ID)
		}
		return ids
	}
	require.Empty(t, due(9))
	require.Equal(t, []string{"b"}, due(15), "a deadline at now is due; a5 waits behind a3")
	require.Equal(t, []string{"a3", "b"}, due(20), "in the order they were parked")
}

// ParkedListDue lists one message per key even when several share the lowest
// version (two unversioned, or two copies of one version): the first of
// them in ParkedForKey's order, the one the sweeper's expiry checks for.
func testOperatorDueHoldsTies(t *testing.T, st store.Store) {
	o := newOp(t, st)
	first := map[string]store.Parked{}
	o.commit(func(e *txEnv) {
		for i, p := range []store.Parked{
			e.parked("k", "crm", "k-a", nil, seqboxtype.ParkHeld, 1),
			e.parked("k", "crm", "k-b", nil, seqboxtype.ParkHeld, 2),
			e.parked("k", "crm", "k-c", ptr(int64(1)), seqboxtype.ParkHeld, 3),
			e.parked("l", "crm", "l-a", ptr(int64(3)), seqboxtype.ParkHeld, 4),
			e.parked("l", "crm", "l-b", ptr(int64(3)), seqboxtype.ParkHeld, 5),
		} {
			p.HoldUntil = at(10 + i)
			e.park(p)
		}
		for _, key := range []string{"k", "l"} {
			first[key] = e.parkedForKey(key)[0]
		}
	})
	got, err := o.op.ParkedListDue(o.ctx, store.ParkedListDueParams{Consumer: o.consumer, Now: at(20)})
	require.NoError(t, err)
	ids := []string{}
	for _, p := range got {
		ids = append(ids, p.ID)
	}
	require.Equal(t, []string{"k-a", "l-a"}, ids, "one per key: the first in line")
	require.Equal(t, []store.Parked{first["k"], first["l"]}, got)
}

// KeyListBlockedBefore lists the keys blocked since strictly before a time,
// oldest block first.
func testOperatorBlockedBefore(t *testing.T, st store.Store) {
	o := newOp(t, st)
	o.commit(func(e *txEnv) {
		e.ensureKeys(at(0), "k1", "k2", "k3", "k4")
		require.NoError(t, e.tx.KeyBlock(e.ctx, store.KeyBlockParams{Consumer: o.consumer, Key: "k1", Source: "crm", ID: "1", Reason: "boom", At: at(10)}))
		require.NoError(t, e.tx.KeyBlock(e.ctx, store.KeyBlockParams{Consumer: o.consumer, Key: "k2", Source: "", ID: "", Reason: "gap", At: at(30)}))
		require.NoError(t, e.tx.KeyBlock(e.ctx, store.KeyBlockParams{Consumer: o.consumer, Key: "k3", Source: "crm", ID: "3", Reason: "boom", At: at(20)}))
		require.NoError(t, e.tx.KeyUnblock(e.ctx, store.KeyUnblockParams{Consumer: o.consumer, Key: "k3", At: at(25)}))
	})
	k1 := store.KeyState{Consumer: o.consumer, Key: "k1", Blocked: true, BlockedSource: "crm", BlockedID: "1",
		BlockedReason: "boom", BlockedSince: at(10), UpdatedAt: at(10)}
	k2 := store.KeyState{Consumer: o.consumer, Key: "k2", Blocked: true, BlockedReason: "gap", BlockedSince: at(30), UpdatedAt: at(30)}
	for before, want := range map[int][]store.KeyState{10: nil, 11: {k1}, 31: {k1, k2}} {
		got, err := o.op.KeyListBlockedBefore(o.ctx, store.KeyListBlockedBeforeParams{Consumer: o.consumer, Before: at(before)})
		require.NoError(t, err)
		require.Equal(t, want, got, "before %d", before)
	}
}

// Seen reports an identity's outcome and payload hash; KeyVersion a key's
// version (nil for a key with none, or none at all).
func testOperatorSeen(t *testing.T, st store.Store) {
	o := newOp(t, st)
	r := store.InboxRow{}
	o.commit(func(e *txEnv) {
		r = e.inboxRow("crm", "1", 1)
		r.Outcome = "dead_lettered"
		_, err := e.tx.InboxInsert(e.ctx, r)
		require.NoError(t, err)
		e.ensureKeys(at(0), "none", "five")
		_, err = e.tx.KeyAdvance(e.ctx, store.KeyAdvanceParams{Consumer: o.consumer, Key: "five", Prev: nil, Next: 5, At: at(1)})
		require.NoError(t, err)
	})
	seen, err := o.op.InboxSeen(o.ctx, store.MessageRef{Consumer: o.consumer, Source: "crm", ID: "1"})
	require.NoError(t, err)
	require.Equal(t, store.Seen{Outcome: seqboxtype.DeadLettered, PayloadHash: r.PayloadHash}, seen)
	_, err = o.op.InboxSeen(o.ctx, store.MessageRef{Consumer: o.consumer, Source: "crm", ID: "2"})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = o.op.InboxSeen(o.ctx, store.MessageRef{Consumer: o.consumer + "/other", Source: "crm", ID: "1"})
	require.ErrorIs(t, err, store.ErrNotFound)

	for key, want := range map[string]*int64{"five": ptr(int64(5)), "none": nil, "missing": nil} {
		v, err := o.op.KeyVersion(o.ctx, store.KeyRef{Consumer: o.consumer, Key: key})
		require.NoError(t, err)
		require.Equal(t, want, v, key)
	}
}

// Operator.DecisionRecord keeps the first decision and returns it to
// every later caller; Decision reads it, wherever it was recorded.
func testOperatorDecision(t *testing.T, st store.Store) {
	o := newOp(t, st)
	_, err := o.op.DecisionGet(o.ctx, store.MessageRef{Consumer: o.consumer, Source: "crm", ID: "1"})
	require.ErrorIs(t, err, store.ErrNotFound)
	got, err := o.op.DecisionRecord(o.ctx, store.DecisionRecordParams{Consumer: o.consumer, Source: "crm", ID: "1", Decision: []byte(`{"route":"a"}`), At: at(1)})
	require.NoError(t, err)
	require.Equal(t, []byte(`{"route":"a"}`), got.Value)
	got, err = o.op.DecisionRecord(o.ctx, store.DecisionRecordParams{Consumer: o.consumer, Source: "crm", ID: "1", Decision: []byte(`{"route":"b"}`), At: at(2)})
	require.NoError(t, err)
	require.Equal(t, []byte(`{"route":"a"}`), got.Value, "the first decider wins")
	got, err = o.op.DecisionGet(o.ctx, store.MessageRef{Consumer: o.consumer, Source: "crm", ID: "1"})
	require.NoError(t, err)
	require.Equal(t, []byte(`{"route":"a"}`), got.Value)

	o.commit(func(e *txEnv) {
		_, err := e.tx.DecisionRecord(e.ctx, store.DecisionRecordParams{Consumer: o.consumer, Source: "crm", ID: "2", Decision: []byte(`{"route":"tx"}`), At: at(3)})
		require.NoError(t, err)
	})
	got, err = o.op.DecisionRecord(o.ctx, store.DecisionRecordParams{Consumer: o.consumer, Source: "crm", ID: "2", Decision: []byte(`{"route":"late"}`), At: at(4)})
	require.NoError(t, err)
	require.Equal(t, []byte(`{"route":"tx"}`), got.Value, "a decision the batch recorded")
	_, err = o.op.DecisionGet(o.ctx, store.MessageRef{Consumer: o.consumer + "/other", Source: "crm", ID: "1"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

// DecisionClaim gives an identity to one owner at a time until the claim
// runs out or is released; the owner may renew it.
func testOperatorClaimDecision(t *testing.T, st store.Store) {
	o := newOp(t, st)
	var held time.Time
	claim := func(owner string, now, until int) bool {
		c, err := o.op.DecisionClaim(o.ctx, store.DecisionClaimParams{Consumer: o.consumer, Source: "crm", ID: "1", Owner: owner, Now: at(now), Until: at(until)})
		require.NoError(t, err)
		held = c.Until
		return c.Claimed
	}
	require.True(t, claim("a", 1, 10))
	require.False(t, claim("b", 2, 12), "a holds it")
	require.True(t, held.Equal(at(10)), "until a's claim runs out: %s", held)
	require.True(t, claim("a", 3, 13), "the owner renews")
	require.False(t, claim("b", 12, 22), "renewed until 13")
	require.True(t, held.Equal(at(13)), "held until %s", held)
	require.True(t, claim("b", 13, 23), "expired: b takes it")
	// The heartbeat of a frozen a, late: it must learn the claim is gone,
	// and leave b's as it is (an extend that renewed whoever held it let
	// a's decider ask while b's asked too).
	extend := func(owner string, now, until int) bool {
		ok, err := o.op.DecisionClaimExtend(o.ctx, store.DecisionClaimParams{Consumer: o.consumer, Source: "crm", ID: "1", Owner: owner, Now: at(now), Until: at(until)})
		require.NoError(t, err)
		return ok
	}
	require.False(t, extend("a", 14, 40), "a's claim was taken over")
	require.False(t, claim("a", 20, 30), "still b's until 23: a's late heartbeat moved nothing")
	require.True(t, held.Equal(at(23)), "b's claim runs out at 23, not %s", held)
	require.True(t, extend("b", 14, 23), "b renews its own")
	require.NoError(t, o.op.DecisionUnclaim(o.ctx, store.DecisionUnclaimParams{Consumer: o.consumer, Source: "crm", ID: "1", Owner: "a"}), "not a's: nothing happens")
	require.False(t, claim("a", 14, 24))
	require.NoError(t, o.op.DecisionUnclaim(o.ctx, store.DecisionUnclaimParams{Consumer: o.consumer, Source: "crm", ID: "1", Owner: "b"}))
	require.True(t, claim("a", 15, 25), "released: free at once")
	c, err := o.op.DecisionClaim(o.ctx, store.DecisionClaimParams{Consumer: o.consumer, Source: "crm", ID: "2", Owner: "b", Now: at(15), Until: at(25)})
	require.NoError(t, err)
	require.True(t, c.Claimed, "claims are per identity")
}

// DecisionRecord with an Owner drops that owner's claim in the same
// commit, and only that owner's: a claim taken over stays its new owner's,
// and a record already there stays as it was.
func testOperatorRecordDropsClaim(t *testing.T, st store.Store) {
	o := newOp(t, st)
	claimed := func(id, owner string, now int) bool {
		c, err := o.op.DecisionClaim(o.ctx, store.DecisionClaimParams{Consumer: o.consumer, Source: "crm", ID: id, Owner: owner, Now: at(now), Until: at(now + 10)})
		require.NoError(t, err)
		return c.Claimed
	}
	record := func(id, owner, value string) store.Decision {
		d, err := o.op.DecisionRecord(o.ctx, store.DecisionRecordParams{Consumer: o.consumer, Source: "crm", ID: id,
			Decision: []byte(value), PayloadHash: "h", At: at(2), Owner: owner})
		require.NoError(t, err)
		return d
	}
	require.True(t, claimed("1", "a", 1))
	require.Equal(t, []byte("yes"), record("1", "a", "yes").Value)
	require.True(t, claimed("1", "b", 2), "a's claim went with its record")
	require.Equal(t, []byte("yes"), record("1", "b", "no").Value, "the first record stays")
	require.True(t, claimed("1", "c", 3), "b's claim went with its (refused) record")

	require.True(t, claimed("2", "b", 1))
	require.Equal(t, []byte("late"), record("2", "a", "late").Value)
	require.False(t, claimed("2", "c", 2), "not a's claim: b still holds it")
}

// DecisionRecord with an Effect records the call's result in the same
// commit as the decision and the claim's drop, or, when the row is no
// longer that call's (resolved by an operator, called again), none of
// them: ErrEffectChanged, on the pool and in a transaction alike.
func testOperatorRecordWithEffect(t *testing.T, st store.Store) {
	o := newOp(t, st)
	pending := func(key, id string) {
		ok, err := o.op.EffectInsertPending(o.ctx, store.EffectInsertPendingParams{Consumer: o.consumer, Source: "crm", ID: id,
			Action: "a", IdempotencyKey: key, At: at(1), LeaseUntil: at(9)})
		require.NoError(t, err)
		require.True(t, ok)
	}
	claim := func(id string) {
		c, err := o.op.DecisionClaim(o.ctx, store.DecisionClaimParams{Consumer: o.consumer, Source: "crm", ID: id, Owner: "w", Now: at(1), Until: at(9)})
		require.NoError(t, err)
		require.True(t, c.Claimed)
	}
	params := func(key, id string, calls int) store.DecisionRecordParams {
		return store.DecisionRecordParams{Consumer: o.consumer, Source: "crm", ID: id, Decision: []byte("d-" + id), PayloadHash: "h",
			At: at(3), Owner: "w", Effect: &store.EffectRecordParams{IdempotencyKey: key,
				From: []seqboxtype.Effect{seqboxtype.EffectPending, seqboxtype.EffectUncertain}, To: seqboxtype.EffectSucceeded,
				Ref: "ref-" + id, At: at(3), Calls: calls}}
	}
	claimFree := func(id string) bool {
		c, err := o.op.DecisionClaim(o.ctx, store.DecisionClaimParams{Consumer: o.consumer, Source: "crm", ID: id, Owner: "other", Now: at(2), Until: at(9)})
		require.NoError(t, err)
		return c.Claimed
	}
	for _, where := range []string{"pool", "tx"} {
		key, id := o.consumer+"/"+where+"/k1", where+"-1"
		pending(key, id)
		claim(id)
		record := func(p store.DecisionRecordParams) (store.Decision, error) {
			if where == "pool" {
				return o.op.DecisionRecord(o.ctx, p)
			}
			var d store.Decision
			var err error
			o.commit(func(e *txEnv) { d, err = e.tx.DecisionRecord(e.ctx, p) })
			return d, err
		}
		// The second call's result for a row that counts one call: not its
		// call's, so nothing is recorded.
		_, err := record(params(key, id, 2))
		require.ErrorIs(t, err, store.ErrEffectChanged, where)
		row, err := o.op.EffectGet(o.ctx, key)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.EffectPending, row.State, "%s: the row is left alone", where)
		_, err = o.op.DecisionGet(o.ctx, store.MessageRef{Consumer: o.consumer, Source: "crm", ID: id})
		require.ErrorIs(t, err, store.ErrNotFound, "%s: no decision without its effect", where)
		require.False(t, claimFree(id), "%s: the claim is kept", where)

		d, err := record(params(key, id, 1))
		require.NoError(t, err, where)
		require.Equal(t, []byte("d-"+id), d.Value)
		row, err = o.op.EffectGet(o.ctx, key)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.EffectSucceeded, row.State, where)
		require.Equal(t, "ref-"+id, row.Ref, where)
		got, err := o.op.DecisionGet(o.ctx, store.MessageRef{Consumer: o.consumer, Source: "crm", ID: id})
		require.NoError(t, err)
		require.Equal(t, []byte("d-"+id), got.Value, where)
		require.True(t, claimFree(id), "%s: the claim went with the record", where)
	}
}

// InboxPurge deletes, oldest first and at most batch at a time, the
// identities whose retention ended before now, except held and blocked
// ones, and the stale attempts of identities it purges; another
// consumer's rows stay.
func testOperatorPurgeInbox(t *testing.T, st store.Store) {
	o := newOp(t, st)
	other := o.consumer + "/other"
	o.commit(func(e *txEnv) {
		add := func(consumer, id string, outcome seqboxtype.Outcome, retention int) {
			r := e.inboxRow("crm", id, 1)
			r.Consumer, r.Outcome, r.RetentionUntil = consumer, outcome, at(retention)
			_, err := e.tx.InboxInsert(e.ctx, r)
			require.NoError(t, err)
		}
		for _, c := range []string{o.consumer, other} {
			add(c, "p3", "applied", 3)
			add(c, "p1", "applied", 1)
			add(c, "p2", "dead_lettered", 2)
			add(c, "held", "held", 1)
			add(c, "blocked", "blocked", 1)
			add(c, "now", "applied", 5)
			add(c, "later", "applied", 9)
		}
		e.retry("k", "crm", "p1", "stale", 0)
		e.retry("k", "crm", "orphan", "still retrying", 0)
	})
	var purged []int64
	for range 4 {
		r, err := o.op.InboxPurge(o.ctx, store.InboxPurgeParams{Consumer: o.consumer, Now: at(5), Limit: 2})
		require.NoError(t, err)
		purged = append(purged, r.Removed)
	}
	require.Equal(t, []int64{2, 1, 0, 0}, purged)
	for id, kept := range map[string]bool{"p1": false, "p2": false, "p3": false, "held": true, "blocked": true, "now": true, "later": true} {
		require.Equal(t, kept, o.seen(id), id)
		require.True(t, o.seenBy(other, id), "another consumer's %s", id)
	}
	retrying := column[string](t)(st.DB().QueryContext(o.ctx, `SELECT id FROM seqbox_retries WHERE consumer = $1`, o.consumer))
	slices.Sort(retrying)
	require.Equal(t, []string{"orphan"}, retrying, "a purged identity's attempts go with it")
}

// InboxPurge removes with an identity what seqbox keeps about it in other
// tables: its decision and any claim on it, its ledger calls that ended
// (succeeded or failed), its business key's claim, its audit rows and its
// resolved dead letters. Before, those rows stayed for good: a decision
// (an agent's whole answer) and a ledger row for every event ever
// decided. A call left uncertain or pending stays (an operator resolves
// it), and so does an open dead letter (its key may be blocked behind
// it); a held identity keeps everything, as does one whose retention has
// not ended, and another consumer's identity of the same name.
func testOperatorPurgeInboxDependents(t *testing.T, st store.Store) {
	o := newOp(t, st)
	other := o.consumer + "/other"
	ids := []string{"gone", "held", "now"}
	o.commit(func(e *txEnv) {
		for _, consumer := range []string{o.consumer, other} {
			for i, id := range ids {
				r := e.inboxRow("crm", id, i+1)
				r.Consumer, r.RetentionUntil = consumer, at(1)
				switch id {
				case "held":
					r.Outcome = "held"
				case "now":
					r.RetentionUntil = at(9)
				}
				_, err := e.tx.InboxInsert(e.ctx, r)
				require.NoError(t, err)
				_, err = e.tx.SQL().ExecContext(e.ctx, `INSERT INTO seqbox_decisions (consumer, source, id, decision, decided_at)
					VALUES ($1, 'crm', $2, $3, 0)`, consumer, id, []byte("the agent's answer"))
				require.NoError(t, err)
				_, err = e.tx.DecisionClaim(e.ctx, store.DecisionClaimParams{Consumer: consumer, Source: "crm", ID: id, Owner: "dead", Now: at(0), Until: at(1)})
				require.NoError(t, err)
				for _, action := range []string{"done", "failed", "unsure"} {
					key := consumer + "/" + id + "/" + action
					ok, err := e.tx.EffectInsertPending(e.ctx, store.EffectInsertPendingParams{Consumer: consumer, Source: "crm", ID: id,
						Action: action, IdempotencyKey: key, At: at(0), LeaseUntil: at(1)})
					require.NoError(t, err)
					require.True(t, ok)
					to := map[string]seqboxtype.Effect{"done": seqboxtype.EffectSucceeded, "failed": seqboxtype.EffectFailed, "unsure": seqboxtype.EffectUncertain}[action]
					require.NoError(t, e.tx.EffectRecord(e.ctx, store.EffectRecordParams{IdempotencyKey: key, To: to, At: at(0),
						From: []seqboxtype.Effect{seqboxtype.EffectPending}}))
				}
				claimed, err := e.tx.BusinessKeyClaim(e.ctx, store.BusinessKeyClaimParams{Consumer: consumer, BusinessKey: r.BusinessKey, Source: "crm", ID: id, At: at(0)})
				require.NoError(t, err)
				require.True(t, claimed)
				require.NoError(t, e.tx.AuditInsert(e.ctx, store.AuditRow{Consumer: consumer, Source: "crm", ID: id, PartitionKey: r.PartitionKey,
					Outcome: seqboxtype.Held, Reason: "waited for its predecessor", NextAction: "none", At: at(0)}))
				for _, resolved := range []bool{true, false} {
					seq, err := e.tx.DeadLetterInsert(e.ctx, deadLetter(consumer, id, i))
					require.NoError(t, err)
					if resolved {
						require.NoError(t, e.tx.DeadLetterResolve(e.ctx, store.DeadLetterResolveParams{Consumer: consumer, Seq: seq,
							State: seqboxtype.DeadLetterSkipped, Resolution: "skipped", At: at(0)}))
					}
				}
			}
		}
	})
	r, err := o.op.InboxPurge(o.ctx, store.InboxPurgeParams{Consumer: o.consumer, Now: at(5), Limit: 10})
	require.NoError(t, err)
	require.Equal(t, int64(1), r.Removed, "gone alone")

	rows := func(consumer, id string) map[string]int {
		got := map[string]int{}
		for table, where := range map[string]string{
			"inbox": "seqbox_inbox", "decision": "seqbox_decisions", "claim": "seqbox_decision_claims",
			"calls": "seqbox_effects", "business key": "seqbox_business_keys", "audit": "seqbox_audit", "dead letters": "seqbox_dlq",
		} {
			var n int
			require.NoError(t, st.DB().QueryRowContext(o.ctx, `SELECT COUNT(*) FROM `+where+` WHERE consumer = $1 AND source = 'crm' AND id = $2`,
				consumer, id).Scan(&n))
			got[table] = n
		}
		return got
	}
	all := map[string]int{"inbox": 1, "decision": 1, "claim": 1, "calls": 3, "business key": 1, "audit": 1, "dead letters": 2}
	require.Equal(t, map[string]int{"inbox": 0, "decision": 0, "claim": 0, "calls": 1, "business key": 0, "audit": 0, "dead letters": 1},
		rows(o.consumer, "gone"), "what is kept of a purged identity: its uncertain call and its open dead letter")
	var state string
	require.NoError(t, st.DB().QueryRowContext(o.ctx, `SELECT state FROM seqbox_effects WHERE consumer = $1 AND id = 'gone'`, o.consumer).Scan(&state))
	require.Equal(t, "uncertain", state)
	require.NoError(t, st.DB().QueryRowContext(o.ctx, `SELECT state FROM seqbox_dlq WHERE consumer = $1 AND id = 'gone'`, o.consumer).Scan(&state))
	require.Equal(t, "open", state)
	for _, id := range []string{"held", "now"} {
		require.Equal(t, all, rows(o.consumer, id), id)
	}
	for _, id := range ids {
		require.Equal(t, all, rows(other, id), "another consumer's %s", id)
	}
}

// InboxPurge reports the latest retention end among what it removed,
// and with From set leaves the identities whose retention ended before
// From: a purge's next batch starts where the last one ended.
func testOperatorPurgeInboxFrom(t *testing.T, st store.Store) {
	o := newOp(t, st)
	o.commit(func(e *txEnv) {
		for id, retention := range map[string]int{"r1": 1, "r2": 2, "r3": 3, "r4": 4} {
			r := e.inboxRow("crm", id, 1)
			r.Outcome, r.RetentionUntil = "applied", at(retention)
			_, err := e.tx.InboxInsert(e.ctx, r)
			require.NoError(t, err)
		}
	})
	purge := func(from time.Time, limit int) store.InboxPurgeResult {
		r, err := o.op.InboxPurge(o.ctx, store.InboxPurgeParams{Consumer: o.consumer, Now: at(5), Limit: limit, From: from})
		require.NoError(t, err)
		return r
	}
	r := purge(at(2), 1)
	require.Equal(t, int64(1), r.Removed)
	require.True(t, r.Last.Equal(at(2)), "the oldest from From: r2, not r1; Last %v", r.Last)
	r = purge(r.Last, 10)
	require.Equal(t, int64(2), r.Removed)
	require.True(t, r.Last.Equal(at(4)), "r3 and r4; Last %v", r.Last)
	require.True(t, o.seen("r1"), "before From: kept")
	for _, id := range []string{"r2", "r3", "r4"} {
		require.False(t, o.seen(id), id)
	}
	r = purge(r.Last, 10)
	require.Equal(t, store.InboxPurgeResult{}, r, "nothing from r4's retention on: none removed, no Last")
	r = purge(time.Time{}, 10)
	require.Equal(t, int64(1), r.Removed, "without From, from the oldest")
	require.True(t, r.Last.Equal(at(1)))
	require.False(t, o.seen("r1"))
}

// ParkedListDue orders holds parked at one instant by seq (the order
// they were parked in), whatever the plan's index order (the hold
// deadline, the key's name).
func testOperatorDueHoldsTieBySeq(t *testing.T, st store.Store) {
	o := newOp(t, st)
	o.commit(func(e *txEnv) {
		for i, key := range []string{"z", "y", "x", "w"} {
			p := e.parked(key, "crm", key+"1", ptr(int64(1)), seqboxtype.ParkHeld, 1)
			p.HoldUntil = at(10 - i) // later-parked keys' holds end earlier
			e.park(p)
		}
	})
	got, err := o.op.ParkedListDue(o.ctx, store.ParkedListDueParams{Consumer: o.consumer, Now: at(20)})
	require.NoError(t, err)
	ids := []string{}
	for _, p := range got {
		ids = append(ids, p.ID)
	}
	require.Equal(t, []string{"z1", "y1", "x1", "w1"}, ids, "parked at one instant: in the order they were parked (seq)")
}
