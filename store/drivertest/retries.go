package drivertest

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// retry records one failed attempt at time n and returns the running
// count.
func (e *txEnv) retry(key, source, id, errText string, n int) int {
	e.t.Helper()
	rc, err := e.tx.RetryRecord(e.ctx, store.RetryRow{
		Consumer: e.consumer, Source: source, ID: id, PartitionKey: key, Error: errText, At: at(n),
	})
	require.NoError(e.t, err)
	return rc.Attempts
}

// retrying lists the identities of the test's consumer that have attempts
// recorded, in source, id order.
func (e *txEnv) retrying() []store.Identity {
	e.t.Helper()
	rows, err := e.tx.SQL().QueryContext(e.ctx, `SELECT source, id FROM seqbox_retries WHERE consumer = $1`, e.consumer)
	require.NoError(e.t, err)
	defer rows.Close()
	var out []store.Identity
	for rows.Next() {
		var id store.Identity
		require.NoError(e.t, rows.Scan(&id.Source, &id.ID))
		out = append(out, id)
	}
	require.NoError(e.t, rows.Err())
	slices.SortFunc(out, compareIdentities)
	return out
}

// compareIdentities orders identities by source, then id.
func compareIdentities(a, b store.Identity) int {
	return cmp.Or(strings.Compare(a.Source, b.Source), strings.Compare(a.ID, b.ID))
}

// RetryRecord counts the attempts of one identity of one consumer and
// keeps the first error, the last error and both times.
func testRecordRetry(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	record := func(consumer, id, errText string, n int) (int, string) {
		t.Helper()
		rc, err := e.tx.RetryRecord(e.ctx, store.RetryRow{
			Consumer: consumer, Source: "crm", ID: id, PartitionKey: "k", Error: errText, At: at(n),
		})
		require.NoError(t, err)
		return rc.Attempts, rc.FirstError
	}
	for i, errText := range []string{"timeout", "connection reset", "503"} {
		attempts, first := record(e.consumer, "1", errText, 10+i)
		require.Equal(t, i+1, attempts)
		require.Equal(t, "timeout", first, "the first error is kept")
	}
	attempts, first := record(e.consumer, "2", "other", 20)
	require.Equal(t, []any{1, "other"}, []any{attempts, first}, "another identity counts for itself")
	attempts, first = record(e.consumer+"/other", "1", "theirs", 21)
	require.Equal(t, []any{1, "theirs"}, []any{attempts, first}, "another consumer counts for itself")

	var n int
	var firstErr, lastErr string
	var firstAt, lastAt int64
	require.NoError(t, e.tx.SQL().QueryRowContext(e.ctx, `SELECT attempts, first_error, last_error, first_at, last_at
		FROM seqbox_retries WHERE consumer = $1 AND source = 'crm' AND id = '1'`, e.consumer).
		Scan(&n, &firstErr, &lastErr, &firstAt, &lastAt))
	require.Equal(t, []any{3, "timeout", "503", at(10).UnixMicro(), at(12).UnixMicro()},
		[]any{n, firstErr, lastErr, firstAt, lastAt})
}

// RetryClear forgets the attempts of one identity: the next failure
// counts from one again.
func testClearRetry(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	e.retry("k", "crm", "1", "a", 1)
	e.retry("k", "crm", "1", "b", 2)
	e.retry("k", "crm", "2", "c", 3)
	require.NoError(t, e.tx.RetryClear(e.ctx, store.MessageRef{Consumer: e.consumer, Source: "crm", ID: "1"}))
	require.Equal(t, []store.Identity{{Source: "crm", ID: "2"}}, e.retrying())
	rc, err := e.tx.RetryRecord(e.ctx, store.RetryRow{Consumer: e.consumer, Source: "crm", ID: "1", PartitionKey: "k", Error: "d", At: at(4)})
	require.NoError(t, err)
	require.Equal(t, store.RetryCount{Attempts: 1, FirstError: "d"}, rc)
	require.NoError(t, e.tx.RetryClear(e.ctx, store.MessageRef{Consumer: e.consumer, Source: "crm", ID: "missing"}))
	require.NoError(t, e.tx.RetryClear(e.ctx, store.MessageRef{Consumer: e.consumer + "/other", Source: "crm", ID: "2"}))
	require.Len(t, e.retrying(), 2, "another consumer's clear")
}

// RetryClearMany forgets the attempts of exactly the identities named,
// across chunk boundaries.
func testClearRetries(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	const n = 300
	var clear, keep []store.Identity
	for i := range n {
		id := store.Identity{Source: fmt.Sprintf("src-%d", i%2), ID: fmt.Sprintf("%03d", i/2)}
		e.retry("k", id.Source, id.ID, "boom", i)
		if i%3 == 0 {
			keep = append(keep, id)
		} else {
			clear = append(clear, id)
		}
	}
	_, err := e.tx.RetryRecord(e.ctx, store.RetryRow{Consumer: e.consumer + "/other", Source: clear[0].Source, ID: clear[0].ID, Error: "x", At: at(0)})
	require.NoError(t, err)
	clear = append(clear, store.Identity{Source: "src-9", ID: "missing"}, store.Identity{Source: keep[0].ID, ID: keep[0].Source})

	require.NoError(t, e.tx.RetryClearMany(e.ctx, store.RetryClearManyParams{Consumer: e.consumer, IDs: clear}))
	slices.SortFunc(keep, compareIdentities)
	require.Equal(t, keep, e.retrying())
	var others int
	require.NoError(t, e.tx.SQL().QueryRowContext(e.ctx, `SELECT COUNT(*) FROM seqbox_retries WHERE consumer = $1`, e.consumer+"/other").Scan(&others))
	require.Equal(t, 1, others, "another consumer's attempts stay")
	require.NoError(t, e.tx.RetryClearMany(e.ctx, store.RetryClearManyParams{

		// RetryOnKey returns the identity of a key that started retrying
		// first, with its last error and time, ignoring identities the inbox has
		// recorded since (stale attempts) and other keys and consumers.
		Consumer: e.consumer, IDs: nil}))
}

func testRetryingOnKey(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	get := func() (store.RetryRow, bool) {
		t.Helper()
		r, err := e.tx.RetryOnKey(e.ctx, store.KeyRef{Consumer: e.consumer, Key: "k"})
		if errors.Is(err, store.ErrNotFound) {
			return r, false
		}
		require.NoError(t, err)
		return r, true
	}
	_, found := get()
	require.False(t, found)

	e.retry("other-key", "crm", "z", "elsewhere", 0)
	_, err := e.tx.RetryRecord(e.ctx, store.RetryRow{Consumer: e.consumer + "/other", Source: "crm", ID: "y", PartitionKey: "k", Error: "theirs", At: at(0)})
	require.NoError(t, err)
	_, found = get()
	require.False(t, found, "other keys and consumers do not count")

	e.retry("k", "crm", "b", "b failed", 2)
	e.retry("k", "crm", "a", "a failed", 1) // first_at earlier than b's
	e.retry("k", "crm", "a", "a failed again", 5)
	r, found := get()
	require.True(t, found)
	require.Equal(t, store.RetryRow{Consumer: e.consumer, Source: "crm", ID: "a", PartitionKey: "k", Error: "a failed again", At: at(5)}, r,
		"the identity that started first, with its last attempt")

	ok, err := e.tx.InboxInsert(e.ctx, e.inboxRow("crm", "a", 1))
	require.NoError(t, err)
	require.True(t, ok)
	r, found = get()
	require.True(t, found)
	require.Equal(t, store.RetryRow{Consumer: e.consumer, Source: "crm", ID: "b", PartitionKey: "k", Error: "b failed", At: at(2)}, r,
		"a settled identity's attempts are stale")

	ok, err = e.tx.InboxInsert(e.ctx, e.inboxRow("crm", "b", 2))
	require.NoError(t, err)
	require.True(t, ok)
	_, found = get()
	require.False(t, found)
}

// TurnTake binds an identity's turn to the payload hash of the copy that
// took it first: taking it again with that hash (or over a failure's row,
// which has none) keeps it; a copy with another hash gets the bound hash
// back and changes nothing, its business key included.
func testTurnTakeBound(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	take := func(id, hash, bk string, n int) string {
		t.Helper()
		bound, err := e.tx.TurnTake(e.ctx, store.TurnTakeParams{Consumer: e.consumer, Source: "crm", ID: id,
			PartitionKey: "k", BusinessKey: bk, PayloadHash: hash, At: at(n)})
		require.NoError(t, err)
		return bound
	}
	businessKey := func(id string) string {
		t.Helper()
		var bk string
		require.NoError(t, e.tx.SQL().QueryRowContext(e.ctx, `SELECT businesskey FROM seqbox_retries
			WHERE consumer = $1 AND source = 'crm' AND id = $2`, e.consumer, id).Scan(&bk))
		return bk
	}
	require.Equal(t, "h1", take("1", "h1", "bk-a", 1), "the first copy binds the turn")
	require.Equal(t, "h1", take("1", "h1", "bk-a", 2), "its own copy takes it again")
	require.Equal(t, "h1", take("1", "h2", "bk-b", 3), "another payload gets the bound hash back")
	require.Equal(t, "bk-a", businessKey("1"), "another payload's business key changes nothing")
	// Taking it again is seeing it again: the sweep's "not seen for the
	// redelivery window" counts from the latest take (a turn taken once,
	// long ago, by a message redelivered since, was ended as gone).
	stale := func(before int) []store.RetryRow {
		t.Helper()
		rows, err := e.tx.TurnListStale(e.ctx, store.TurnListStaleParams{Consumer: e.consumer, Before: at(before), Limit: 10})
		require.NoError(t, err)
		return rows
	}
	require.Empty(t, stale(2), "last seen at 2, by its own copy's take")
	require.Len(t, stale(3), 1)
	require.True(t, stale(3)[0].At.Equal(at(2)), "last seen %s", stale(3)[0].At)

	e.retry("k", "crm", "2", "boom", 1)
	require.Equal(t, "h2", take("2", "h2", "bk-c", 2), "a failure's row is bound by the first turn over it")
	require.Equal(t, "h2", take("2", "h3", "", 3))
	require.Equal(t, 2, e.retry("k", "crm", "2", "boom", 4), "the failure's attempts are kept")
}

// testManyReads checks the set-based reads of a consumer with Decide
// (DecisionGetMany, TurnBoundToMany) against the one-by-one reads, over
// more identities than one SQLite statement holds, and InboxDeleteMany
// against the rows it leaves.
func testManyReads(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	ref := store.IdentitiesRef{Consumer: e.consumer}
	ds, err := tx.DecisionGetMany(ctx, ref)
	require.NoError(t, err)
	require.Empty(t, ds, "nothing asked")
	require.NoError(t, tx.InboxDeleteMany(ctx, ref), "nothing to delete")
	for i := range 300 {
		id := store.Identity{Source: fmt.Sprintf("src-%d", i%2), ID: fmt.Sprintf("%03d", i)}
		ref.IDs = append(ref.IDs, id)
		switch i % 3 {
		case 0:
			_, err := tx.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: e.consumer, Source: id.Source, ID: id.ID,
				Decision: []byte("d-" + id.ID), PayloadHash: "h-" + id.ID, At: at(i)})
			require.NoError(t, err)
		case 1:
			_, err := tx.TurnTake(ctx, store.TurnTakeParams{Consumer: e.consumer, Source: id.Source, ID: id.ID,
				PartitionKey: "k", PayloadHash: "h-" + id.ID, At: at(i)})
			require.NoError(t, err)
			ok, err := tx.InboxInsert(ctx, e.inboxRow(id.Source, id.ID, i))
			require.NoError(t, err)
			require.True(t, ok)
		}
	}
	// Another consumer's rows are never read.
	_, err = tx.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: e.consumer + "/other", Source: "src-1", ID: "001", Decision: []byte("x"), At: at(0)})
	require.NoError(t, err)

	ds, err = tx.DecisionGetMany(ctx, ref)
	require.NoError(t, err)
	bound, err := tx.TurnBoundToMany(ctx, ref)
	require.NoError(t, err)
	require.Len(t, ds, 100)
	require.Len(t, bound, 100)
	for _, id := range ref.IDs {
		r := store.MessageRef{Consumer: e.consumer, Source: id.Source, ID: id.ID}
		one, err := tx.DecisionGet(ctx, r)
		if errors.Is(err, store.ErrNotFound) {
			require.NotContains(t, ds, id)
		} else {
			require.NoError(t, err)
			require.Equal(t, one, ds[id], "%v as DecisionGet reads it", id)
		}
		hash, err := tx.TurnBoundTo(ctx, r)
		require.NoError(t, err)
		require.Equal(t, hash, bound[id], "%v as TurnBoundTo reads it", id)
	}

	require.NoError(t, tx.InboxDeleteMany(ctx, store.IdentitiesRef{Consumer: e.consumer, IDs: ref.IDs[:150]}))
	left, err := tx.InboxGetMany(ctx, store.InboxGetManyParams{Consumer: e.consumer, IDs: ref.IDs})
	require.NoError(t, err)
	require.Len(t, left, 50, "the rows not asked for stay")
	for id := range left {
		require.NotContains(t, ref.IDs[:150], id)
	}
}

// testTakeMany checks TurnTakeMany and DecisionClaimMany against what
// TurnTake and DecisionClaim do one by one, over more rows than one
// SQLite statement holds.
func testTakeMany(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	got, err := tx.TurnTakeMany(ctx, store.TurnTakeManyParams{Consumer: e.consumer, At: at(1)})
	require.NoError(t, err)
	require.Empty(t, got, "nothing asked")
	var turns []store.TurnRow
	var ids []store.Identity
	for i := range 300 {
		id := store.Identity{Source: "crm", ID: fmt.Sprintf("%03d", i)}
		ids = append(ids, id)
		turns = append(turns, store.TurnRow{Source: id.Source, ID: id.ID, PartitionKey: "k", PayloadHash: "h-" + id.ID})
		if i%3 == 0 { // held already by another copy
			_, err := tx.TurnTake(ctx, store.TurnTakeParams{Consumer: e.consumer, Source: id.Source, ID: id.ID,
				PartitionKey: "k", PayloadHash: "other", At: at(0)})
			require.NoError(t, err)
		}
	}
	turns = append(turns, turns[1]) // a repeat is taken once
	got, err = tx.TurnTakeMany(ctx, store.TurnTakeManyParams{Consumer: e.consumer, At: at(2), Turns: turns})
	require.NoError(t, err)
	require.Len(t, got, 100)
	for i, id := range ids {
		bound, err := tx.TurnBoundTo(ctx, store.MessageRef{Consumer: e.consumer, Source: id.Source, ID: id.ID})
		require.NoError(t, err)
		if i%3 == 0 {
			require.Equal(t, "other", got[id], "bound to another copy: its hash comes back")
			require.Equal(t, "other", bound, "and its turn is left alone")
			continue
		}
		require.NotContains(t, got, id)
		require.Equal(t, "h-"+id.ID, bound)
	}
	require.Equal(t, 300, len(e.retrying()), "one turn each")
	// Taken again by its own copy, a turn is seen again: the sweep counts
	// its redelivery window from the latest take.
	got, err = tx.TurnTakeMany(ctx, store.TurnTakeManyParams{Consumer: e.consumer, At: at(3), Turns: turns[1:2]})
	require.NoError(t, err)
	require.Empty(t, got)
	stale, err := tx.TurnListStale(ctx, store.TurnListStaleParams{Consumer: e.consumer, Before: at(3), Limit: 1000})
	require.NoError(t, err)
	for _, r := range stale {
		require.NotEqual(t, ids[1].ID, r.ID, "taken again at 3, listed as last seen %s", r.At)
	}
	require.Len(t, stale, 299)

	claims := store.DecisionClaimManyParams{Consumer: e.consumer, IDs: append(ids, ids[0]), Owner: "me", Now: at(5), Until: at(8)}
	for i, id := range ids {
		switch i % 3 {
		case 0: // another owner's live claim
			_, err = tx.DecisionClaim(ctx, store.DecisionClaimParams{Consumer: e.consumer, Source: id.Source, ID: id.ID, Owner: "other", Now: at(4), Until: at(9)})
		case 1: // another owner's claim that ran out
			_, err = tx.DecisionClaim(ctx, store.DecisionClaimParams{Consumer: e.consumer, Source: id.Source, ID: id.ID, Owner: "other", Now: at(1), Until: at(5)})
		}
		require.NoError(t, err)
	}
	claimed, err := tx.DecisionClaimMany(ctx, claims)
	require.NoError(t, err)
	require.Len(t, claimed, 200)
	for i, id := range ids {
		live, err := tx.DecisionClaimLive(ctx, store.DecisionClaimParams{Consumer: e.consumer, Source: id.Source, ID: id.ID, Now: at(7)})
		require.NoError(t, err)
		require.True(t, live)
		require.Equal(t, i%3 != 0, claimed[id], "%v: claimed unless another owner's claim is alive", id)
	}
	again, err := tx.DecisionClaimMany(ctx, claims)
	require.NoError(t, err)
	require.Equal(t, claimed, again, "the owner's own claims are its again")
}

// testDecisionLook checks DecisionLook against DecisionGet, InboxSeen and
// TurnHeld read one by one.
func testDecisionLook(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	look := func(id string) store.DecisionLook {
		t.Helper()
		l, err := tx.DecisionLook(ctx, store.MessageRef{Consumer: e.consumer, Source: "crm", ID: id})
		require.NoError(t, err)
		return l
	}
	require.Equal(t, store.DecisionLook{}, look("1"), "nothing recorded")
	_, err := tx.TurnTake(ctx, store.TurnTakeParams{Consumer: e.consumer, Source: "crm", ID: "1", PartitionKey: "k", PayloadHash: "h", At: at(1)})
	require.NoError(t, err)
	require.Equal(t, store.DecisionLook{TurnHeld: true}, look("1"))
	_, err = tx.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: e.consumer, Source: "crm", ID: "1", Decision: []byte("d"), PayloadHash: "h", At: at(2)})
	require.NoError(t, err)
	require.Equal(t, store.DecisionLook{Decided: true, TurnHeld: true}, look("1"))
	r := e.inboxRow("crm", "1", 3)
	r.Outcome = seqboxtype.DeadLettered
	_, err = tx.InboxInsert(ctx, r)
	require.NoError(t, err)
	require.Equal(t, store.DecisionLook{Decided: true, Seen: true, Outcome: seqboxtype.DeadLettered, TurnHeld: true}, look("1"))
	pending := e.inboxRow("crm", "2", 3)
	pending.Outcome = ""
	_, err = tx.InboxInsert(ctx, pending)
	require.NoError(t, err)
	require.Equal(t, store.DecisionLook{Seen: true}, look("2"), "left without an outcome")
	other := store.MessageRef{Consumer: e.consumer + "/other", Source: "crm", ID: "1"}
	l, err := tx.DecisionLook(ctx, other)
	require.NoError(t, err)
	require.Equal(t, store.DecisionLook{}, l, "another consumer's rows are not read")
}

// RetryRowsOnKeys lists every identity with a retry row on each key asked
// for, settled in the inbox or not, across chunk boundaries, and nothing of
// other keys or consumers.
func testRetryRowsOnKeys(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	var keys []string
	want := map[string][]store.Identity{}
	for i := range 150 {
		key := fmt.Sprintf("k%03d", i)
		keys = append(keys, key)
		if i%3 == 0 {
			continue // asked for, holds none
		}
		for j := range i%2 + 1 {
			id := store.Identity{Source: "crm", ID: fmt.Sprintf("%s-%d", key, j)}
			e.retry(key, id.Source, id.ID, "boom", i)
			want[key] = append(want[key], id)
		}
	}
	ok, err := e.tx.InboxInsert(e.ctx, e.inboxRow("crm", "k001-0", 1))
	require.NoError(t, err)
	require.True(t, ok, "k001-0 is settled in the inbox: its row still counts")
	e.retry("not-asked", "crm", "x", "elsewhere", 0)
	_, err = e.tx.RetryRecord(e.ctx, store.RetryRow{Consumer: e.consumer + "/other", Source: "crm", ID: "y", PartitionKey: "k001", Error: "theirs", At: at(0)})
	require.NoError(t, err)

	got, err := e.tx.RetryRowsOnKeys(e.ctx, store.KeysRef{Consumer: e.consumer, Keys: append(keys, "k001")})
	require.NoError(t, err)
	for _, ids := range got {
		slices.SortFunc(ids, compareIdentities)
	}
	require.Equal(t, want, got)
	none, err := e.tx.RetryRowsOnKeys(e.ctx, store.KeysRef{Consumer: e.consumer})
	require.NoError(t, err)
	require.Empty(t, none)
}

// BusinessKeyTouched finds another identity of the business key that
// settled without applying while a call of it is pending (its caller may
// have died mid-call), uncertain or succeeded: each of those may have
// taken effect. A failed call, or an identity that applied, is no reason.
func testBusinessKeyTouched(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	touched := func() string {
		t.Helper()
		id, err := tx.BusinessKeyTouched(ctx, store.BusinessKeyRef{Consumer: e.consumer, BusinessKey: "refund:7", Source: "crm", ID: "b"})
		if errors.Is(err, store.ErrNotFound) {
			return ""
		}
		require.NoError(t, err)
		return id.Source + "/" + id.ID
	}
	row := e.inboxRow("crm", "a", 1)
	row.BusinessKey, row.Outcome = "refund:7", "dead_lettered"
	ok, err := tx.InboxInsert(ctx, row)
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, touched(), "no call of a")
	ok, err = tx.EffectInsertPending(ctx, store.EffectInsertPendingParams{Consumer: e.consumer, Source: "crm", ID: "a",
		Action: "refund", IdempotencyKey: "sbx-touched-a", At: at(1), LeaseUntil: at(2)})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "crm/a", touched(), "pending: a's caller may have died mid-call")
	for _, step := range []struct {
		from, to seqboxtype.Effect
		want     string
	}{
		{seqboxtype.EffectPending, seqboxtype.EffectUncertain, "crm/a"},
		{seqboxtype.EffectUncertain, seqboxtype.EffectFailed, ""},
		{seqboxtype.EffectFailed, seqboxtype.EffectPending, "crm/a"},
	} {
		moved, err := tx.EffectTransition(ctx, store.EffectTransitionParams{IdempotencyKey: "sbx-touched-a", From: step.from, To: step.to, At: at(3), LeaseUntil: at(4)})
		require.NoError(t, err)
		require.True(t, moved, "%s to %s", step.from, step.to)
		require.Equal(t, step.want, touched(), "a's call %s", step.to)
	}
}

// testTurnWaits: a turn counts the deliveries that ended in a wait
// (TurnTakeParams.Waited), from its first taking on, whatever takes it
// again without waiting or records a failed attempt; RetryClear forgets
// them with the turn, and an identity without a turn has none. Another
// copy's wait (another payload hash) counts nothing on a bound turn.
func testTurnWaits(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	ref := store.MessageRef{Consumer: e.consumer, Source: "crm", ID: "1"}
	waits := func(r store.MessageRef) int {
		t.Helper()
		n, err := tx.TurnWaits(ctx, r)
		require.NoError(t, err)
		return n
	}
	take := func(hash string, waited bool) string {
		t.Helper()
		bound, err := tx.TurnTake(ctx, store.TurnTakeParams{Consumer: e.consumer, Source: "crm", ID: "1", PartitionKey: "k",
			PayloadHash: hash, At: at(1), Waited: waited})
		require.NoError(t, err)
		return bound
	}
	require.Equal(t, 0, waits(ref), "no turn")
	take("h", true)
	require.Equal(t, 1, waits(ref), "a wait that took the turn first")
	take("h", false)
	take("h", true)
	_, err := tx.RetryRecord(ctx, store.RetryRow{Consumer: e.consumer, Source: "crm", ID: "1", PartitionKey: "k", Error: "boom", At: at(2)})
	require.NoError(t, err)
	take("h", true)
	require.Equal(t, 3, waits(ref))
	require.Equal(t, "h", take("other", true), "bound to its first copy")
	require.Equal(t, 3, waits(ref), "another copy's wait is not this turn's")
	require.Equal(t, 0, waits(store.MessageRef{Consumer: e.consumer + "/other", Source: "crm", ID: "1"}), "another consumer's rows are not read")
	require.NoError(t, tx.RetryClear(ctx, ref))
	require.Equal(t, 0, waits(ref), "cleared with the turn")
}
