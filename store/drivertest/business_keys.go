package drivertest

import (
	"errors"
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// testBusinessKeyInFlight checks which other identity holding a turn of
// a business key goes before the one asking (docs/design.md §10.2): an
// identity whose call took effect or may have (pending, uncertain or
// succeeded in the ledger) goes before one that made none; between two
// that both made one, or neither, the earlier turn goes first; a turn
// whose identity has applied holds nothing, one whose identity is parked
// (held or blocked) still holds it; another consumer's turn is not seen.
// Each case has a business key of its own. Hand-made SQL mutants that
// left out the uncertain state, or the rule for two identities that both
// made a call, lived through every suite before this test.
func testBusinessKeyInFlight(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	// Each case has a business key of its own, and identities of its own
	// (bk/a, bk/b): a turn belongs to one identity.
	take := func(consumer, bk, id string, n int) {
		t.Helper()
		_, err := tx.TurnTake(ctx, store.TurnTakeParams{Consumer: consumer, Source: "crm", ID: bk + "/" + id, PartitionKey: "k-" + bk + "/" + id,
			BusinessKey: bk, PayloadHash: "h-" + id, At: at(n)})
		require.NoError(t, err)
	}
	call := func(bk, id string, state seqboxtype.Effect) {
		t.Helper()
		key := e.consumer + "/" + bk + "/" + id
		ok, err := tx.EffectInsertPending(ctx, store.EffectInsertPendingParams{Consumer: e.consumer, Source: "crm", ID: bk + "/" + id,
			Action: "act", IdempotencyKey: key, At: at(1), LeaseUntil: at(2)})
		require.NoError(t, err)
		require.True(t, ok)
		if state != seqboxtype.EffectPending {
			moved, err := tx.EffectTransition(ctx, store.EffectTransitionParams{IdempotencyKey: key, From: seqboxtype.EffectPending, To: state, At: at(2)})
			require.NoError(t, err)
			require.True(t, moved)
		}
	}
	inFlight := func(bk, id string) string {
		t.Helper()
		other, err := tx.BusinessKeyInFlight(ctx, store.BusinessKeyRef{Consumer: e.consumer, BusinessKey: bk, Source: "crm", ID: bk + "/" + id})
		if errors.Is(err, store.ErrNotFound) {
			return ""
		}
		require.NoError(t, err)
		require.Equal(t, "crm", other.Source)
		return other.ID[len(bk)+1:]
	}

	// Neither made a call: the earlier turn goes first.
	take(e.consumer, "plain", "a", 1)
	take(e.consumer, "plain", "b", 2)
	require.Equal(t, "a", inFlight("plain", "b"), "a's turn is the earlier")
	require.Equal(t, "", inFlight("plain", "a"), "b's turn is the later")
	require.Equal(t, "a", inFlight("plain", "c"), "an identity with no turn yet waits for the first")

	// The later turn made a call that took effect or may have: it goes
	// first, unless its call certainly failed.
	for _, state := range []seqboxtype.Effect{seqboxtype.EffectPending, seqboxtype.EffectUncertain, seqboxtype.EffectSucceeded, seqboxtype.EffectFailed} {
		bk := "theirs-" + string(state)
		take(e.consumer, bk, "b", 1)
		take(e.consumer, bk, "a", 2)
		call(bk, "a", state)
		want := "a"
		if state == seqboxtype.EffectFailed {
			want = ""
		}
		require.Equal(t, want, inFlight(bk, "b"), "the later turn's call is %s", state)
	}

	// The asker made a call, the earlier turn none: the asker goes first,
	// and the earlier one waits for it.
	take(e.consumer, "mine", "a", 1)
	take(e.consumer, "mine", "b", 2)
	call("mine", "b", seqboxtype.EffectUncertain)
	require.Equal(t, "", inFlight("mine", "b"), "b's call may have taken effect: it goes first")
	require.Equal(t, "b", inFlight("mine", "a"), "a waits for b's call")

	// Both made a call: the earlier turn goes first.
	take(e.consumer, "both", "a", 1)
	take(e.consumer, "both", "b", 2)
	call("both", "a", seqboxtype.EffectUncertain)
	call("both", "b", seqboxtype.EffectUncertain)
	require.Equal(t, "a", inFlight("both", "b"), "both called: a's turn is the earlier")
	require.Equal(t, "", inFlight("both", "a"))

	// A turn whose identity applied holds nothing; a parked one (held or
	// blocked) still holds it.
	for _, outcome := range []seqboxtype.Outcome{seqboxtype.Applied, seqboxtype.Held, seqboxtype.Blocked} {
		bk := "inbox-" + string(outcome)
		take(e.consumer, bk, "a", 1)
		take(e.consumer, bk, "b", 2)
		r := e.inboxRow("crm", bk+"/a", 1)
		r.BusinessKey, r.Outcome = bk, outcome
		ok, err := tx.InboxInsert(ctx, r)
		require.NoError(t, err)
		require.True(t, ok)
		want := "a"
		if outcome == seqboxtype.Applied {
			want = ""
		}
		require.Equal(t, want, inFlight(bk, "b"), "a is %s in the inbox", outcome)
	}

	// Another consumer's turn of the same business key is not seen.
	take(e.consumer+"/other", "theirs-only", "a", 1)
	take(e.consumer, "theirs-only", "b", 2)
	require.Equal(t, "", inFlight("theirs-only", "b"))
}

// testBusinessKeyTouchedByEachOutcome: an identity of the business key
// that ended stale, expired or dead-lettered while its call succeeded (or
// may have) touched the key, whichever of the three; one that applied, or
// is parked (held), did not settle without applying. A hand-made SQL
// mutant that left expired out lived through every suite before this
// test (the existing one reads dead_lettered only).
func testBusinessKeyTouchedByEachOutcome(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	for _, c := range []struct {
		outcome seqboxtype.Outcome
		touched bool
	}{
		{seqboxtype.DeadLettered, true}, {seqboxtype.Stale, true}, {seqboxtype.Expired, true},
		{seqboxtype.Applied, false}, {seqboxtype.Held, false},
	} {
		bk := "touched-" + string(c.outcome)
		r := e.inboxRow("crm", bk+"/a", 1)
		r.BusinessKey, r.Outcome = bk, c.outcome
		ok, err := tx.InboxInsert(ctx, r)
		require.NoError(t, err)
		require.True(t, ok)
		key := e.consumer + "/" + bk
		ok, err = tx.EffectInsertPending(ctx, store.EffectInsertPendingParams{Consumer: e.consumer, Source: "crm", ID: bk + "/a",
			Action: "act", IdempotencyKey: key, At: at(1), LeaseUntil: at(2)})
		require.NoError(t, err)
		require.True(t, ok)
		moved, err := tx.EffectTransition(ctx, store.EffectTransitionParams{IdempotencyKey: key, From: seqboxtype.EffectPending, To: seqboxtype.EffectSucceeded, At: at(2)})
		require.NoError(t, err)
		require.True(t, moved)
		id, err := tx.BusinessKeyTouched(ctx, store.BusinessKeyRef{Consumer: e.consumer, BusinessKey: bk, Source: "crm", ID: bk + "/b"})
		if !c.touched {
			require.ErrorIs(t, err, store.ErrNotFound, "%s: no reason to keep b from its call", c.outcome)
			continue
		}
		require.NoError(t, err, "%s with a call that succeeded: b must not call again", c.outcome)
		require.Equal(t, store.Identity{Source: "crm", ID: bk + "/a"}, id, c.outcome)
	}
}

// testTurnOfAParkedOrDeadLetteredHolder: a key's turn is held by an
// identity that is parked (held or blocked) or dead-lettered with its
// dead letter still open (a redrive's turn), and by none of those once
// the identity applied or its dead letter was resolved (RetryOnKey, and
// the sweep's TurnListStale, through the same condition).
func testTurnOfAParkedOrDeadLetteredHolder(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	holder := func(key string) string {
		t.Helper()
		r, err := tx.RetryOnKey(ctx, store.KeyRef{Consumer: e.consumer, Key: key})
		if errors.Is(err, store.ErrNotFound) {
			return ""
		}
		require.NoError(t, err)
		return r.ID
	}
	stale := func(key string) bool {
		t.Helper()
		rows, err := tx.TurnListStale(ctx, store.TurnListStaleParams{Consumer: e.consumer, Before: at(100), Limit: 100})
		require.NoError(t, err)
		for _, r := range rows {
			if r.PartitionKey == key {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		outcome seqboxtype.Outcome
		dlq     string // "", "open" or "resolved"
		holds   bool
	}{
		{seqboxtype.Held, "", true}, {seqboxtype.Blocked, "", true},
		{seqboxtype.DeadLettered, "open", true}, {seqboxtype.DeadLettered, "resolved", false},
		{seqboxtype.Applied, "", false},
	} {
		key := "k-" + string(c.outcome) + "-" + c.dlq
		id := key + "/x"
		_, err := tx.TurnTake(ctx, store.TurnTakeParams{Consumer: e.consumer, Source: "crm", ID: id, PartitionKey: key, PayloadHash: "h", At: at(1)})
		require.NoError(t, err)
		r := e.inboxRow("crm", id, 1)
		r.PartitionKey, r.Outcome = key, c.outcome
		ok, err := tx.InboxInsert(ctx, r)
		require.NoError(t, err)
		require.True(t, ok)
		if c.dlq != "" {
			seq, err := tx.DeadLetterInsert(ctx, store.DeadLetter{Consumer: e.consumer, Source: "crm", ID: id, PartitionKey: key,
				PayloadHash: "h", Envelope: []byte("{}"), Reason: "boom", Attempts: 1, DeadAt: at(2)})
			require.NoError(t, err)
			if c.dlq == "resolved" {
				require.NoError(t, tx.DeadLetterResolve(ctx, store.DeadLetterResolveParams{Consumer: e.consumer, Seq: seq,
					State: seqboxtype.DeadLetterSkipped, Resolution: "test", At: at(3)}))
			}
		}
		want := ""
		if c.holds {
			want = id
		}
		require.Equal(t, want, holder(key), "%s (dead letter %q)", c.outcome, c.dlq)
		require.Equal(t, c.holds, stale(key), "%s (dead letter %q): listed for the sweep only while it holds the turn", c.outcome, c.dlq)
	}
}
