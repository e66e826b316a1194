package drivertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// inboxRow is a row of the test's consumer with every column set; n
// varies the values.
func (e *txEnv) inboxRow(source, id string, n int) store.InboxRow {
	return store.InboxRow{
		Consumer: e.consumer, Source: source, ID: id,
		PayloadHash:     fmt.Sprintf("sha256:%064x", n),
		BusinessKey:     fmt.Sprintf("bk-%s-%s", source, id),
		EventType:       "com.example.order.updated",
		Tenant:          "acme",
		ContractVersion: "v2",
		CausationID:     fmt.Sprintf("CMD-%d", n),
		PartitionKey:    fmt.Sprintf("order-%d", n%7),
		ObjectVersion:   ptr(int64(n)),
		Outcome:         "applied",
		ReceivedAt:      at(n),
		ProcessedAt:     ptr(at(n + 1)),
		ResultReference: fmt.Sprintf("ref-%d", n),
		RetentionUntil:  at(n + 86400),
	}
}

// requireInbox reads an identity back and compares it with want.
func (e *txEnv) requireInbox(want store.InboxRow, msgAndArgs ...any) {
	e.t.Helper()
	got, err := e.tx.InboxGet(e.ctx, store.MessageRef{Consumer: want.Consumer, Source: want.Source, ID: want.ID})
	require.NoError(e.t, err, msgAndArgs...)
	require.Equal(e.t, want, got, msgAndArgs...)
}

// requireNoInbox checks that an identity is not recorded.
func (e *txEnv) requireNoInbox(consumer, source, id string) {
	e.t.Helper()
	_, err := e.tx.InboxGet(e.ctx, store.MessageRef{Consumer: consumer, Source: source, ID: id})
	require.ErrorIs(e.t, err, store.ErrNotFound, "%s %s/%s", consumer, source, id)
}

// InsertInbox reports whether the identity was new, and an existing
// identity is never overwritten, whatever its payload. Every column
// round-trips through Inbox, nil pointers included.
func testInsertInbox(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	e.requireNoInbox(e.consumer, "crm", "1")

	r := e.inboxRow("crm", "1", 3)
	ok, err := tx.InboxInsert(ctx, r)
	require.NoError(t, err)
	require.True(t, ok, "a new identity is inserted")
	e.requireInbox(r)

	ok, err = tx.InboxInsert(ctx, r)
	require.NoError(t, err)
	require.False(t, ok, "the same identity again")

	other := e.inboxRow("crm", "1", 4) // same identity, another payload
	other.Outcome = "pending"
	ok, err = tx.InboxInsert(ctx, other)
	require.NoError(t, err)
	require.False(t, ok, "the same identity with another payload")
	e.requireInbox(r, "the first row stays as it was")

	// The identity is (consumer, source, id): any part differing is new.
	for _, r := range []store.InboxRow{e.inboxRow("erp", "1", 5), e.inboxRow("crm", "2", 6)} {
		ok, err = tx.InboxInsert(ctx, r)
		require.NoError(t, err)
		require.True(t, ok, "%s/%s", r.Source, r.ID)
		e.requireInbox(r)
	}
	r2 := e.inboxRow("crm", "1", 7)
	r2.Consumer += "/other"
	ok, err = tx.InboxInsert(ctx, r2)
	require.NoError(t, err)
	require.True(t, ok, "the same source and id for another consumer")
	e.requireInbox(r2)
	e.requireInbox(r, "another consumer's row leaves this one alone")

	// No version and not processed: NULL, read back as nil. Version 0 is
	// a version.
	bare := e.inboxRow("crm", "bare", 8)
	bare.ObjectVersion, bare.ProcessedAt = nil, nil
	bare.BusinessKey, bare.Tenant, bare.ContractVersion, bare.PartitionKey, bare.ResultReference, bare.CausationID = "", "", "", "", "", ""
	zero := e.inboxRow("crm", "zero", 9)
	zero.ObjectVersion = ptr(int64(0))
	for _, r := range []store.InboxRow{bare, zero} {
		ok, err = tx.InboxInsert(ctx, r)
		require.NoError(t, err)
		require.True(t, ok)
		e.requireInbox(r)
	}
}

// inboxBatchSizes cross every chunk boundary of the batch statements
// (powers of two up to 128 rows).
var inboxBatchSizes = []int{1, 2, 63, 64, 65, 127, 128, 129, 300}

// InboxInsertMany reports, row by row, whether each identity was new,
// across every chunk boundary: rows already recorded (with another
// payload) are false and keep their first row; identities that share an id
// under different sources are told apart; another consumer's rows change
// nothing.
func testInsertInboxes(t *testing.T, st store.Store) {
	t.Parallel()
	for _, n := range inboxBatchSizes {
		t.Run(fmt.Sprintf("rows=%d", n), func(t *testing.T) {
			e := beginTx(t, st)
			ctx, tx := e.ctx, e.tx
			rows := make([]store.InboxRow, n)
			existing := make([]bool, n)
			var before, others []store.InboxRow
			for i := range rows {
				// Three sources share each id: only source and id together
				// name a row.
				r := e.inboxRow(fmt.Sprintf("src-%d", i%3), fmt.Sprintf("id-%d", i/3), i)
				if i%2 == 0 {
					r.ObjectVersion = nil
				}
				if i%3 == 0 {
					r.ProcessedAt = nil
				}
				rows[i] = r
				// An irregular pattern of rows recorded before, in every chunk.
				if i%5 == 1 || i%7 == 3 || i == n-1 {
					existing[i] = true
					old := r
					old.PayloadHash, old.Outcome, old.ObjectVersion = "old-"+r.PayloadHash, "pending", ptr(int64(-i))
					before = append(before, old)
				}
				// The same identities for another consumer.
				r.Consumer += "/other"
				others = append(others, r)
			}
			// One consumer per call: InsertInboxesManyConsumers covers
			// rows of several.
			for _, setup := range [][]store.InboxRow{before, others} {
				inserted, err := tx.InboxInsertMany(ctx, setup)
				require.NoError(t, err)
				require.Len(t, inserted, len(setup))
				for i, ok := range inserted {
					require.True(t, ok, "setup row %d", i)
				}
			}

			inserted, err := tx.InboxInsertMany(ctx, rows)
			require.NoError(t, err)
			require.Len(t, inserted, n)
			for i := range rows {
				require.Equal(t, !existing[i], inserted[i], "row %d (%s/%s)", i, rows[i].Source, rows[i].ID)
			}
			for _, old := range before {
				e.requireInbox(old, "%s/%s was recorded before and keeps its row", old.Source, old.ID)
			}
			for i, r := range rows {
				if !existing[i] {
					e.requireInbox(r, "row %d", i)
				}
			}
			require.Equal(t, n, e.count("seqbox_inbox", ""))

			inserted, err = tx.InboxInsertMany(ctx, rows)
			require.NoError(t, err)
			require.Equal(t, make([]bool, n), inserted, "every row is recorded now")
		})
	}
}

// InboxInsertMany of no rows does nothing.
func testInsertInboxesEmpty(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	inserted, err := e.tx.InboxInsertMany(e.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, inserted)
}

// InboxInsertMany rows carry their consumer each: the same source and id
// for two consumers are two identities, and each row is reported for
// itself whichever of them was recorded before.
func testInsertInboxesManyConsumers(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	a, b := e.inboxRow("crm", "1", 1), e.inboxRow("crm", "1", 2)
	b.Consumer += "/b"
	ok, err := tx.InboxInsert(ctx, b)
	require.NoError(t, err)
	require.True(t, ok)

	inserted, err := tx.InboxInsertMany(ctx, []store.InboxRow{b, a})
	require.NoError(t, err)
	require.Equal(t, []bool{false, true}, inserted, "b was recorded before, a is new")
	e.requireInbox(a)

	c, d := e.inboxRow("erp", "9", 3), e.inboxRow("erp", "9", 4)
	d.Consumer += "/b"
	ok, err = tx.InboxInsert(ctx, c)
	require.NoError(t, err)
	require.True(t, ok)
	inserted, err = tx.InboxInsertMany(ctx, []store.InboxRow{d, c})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, inserted, "d is new, c was recorded before")
}

// SetInboxOutcome changes the outcome and the processing time (nil:
// NULL) of one identity of one consumer, and nothing else.
func testSetInboxOutcome(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	r := e.inboxRow("crm", "1", 1)
	r.Outcome, r.ProcessedAt = "pending", nil
	other := r
	other.Consumer += "/other"
	for _, row := range []store.InboxRow{r, other} {
		_, err := tx.InboxInsert(ctx, row)
		require.NoError(t, err)
	}

	require.NoError(t, tx.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: e.consumer, Source: "crm", ID: "1", Outcome: "applied", ProcessedAt: ptr(at(50))}))
	r.Outcome, r.ProcessedAt = "applied", ptr(at(50))
	e.requireInbox(r)
	e.requireInbox(other, "another consumer's identity is untouched")

	require.NoError(t, tx.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: e.consumer, Source: "crm", ID: "1", Outcome: "dead_lettered", ProcessedAt: nil}))
	r.Outcome, r.ProcessedAt = "dead_lettered", nil
	e.requireInbox(r, "a nil processing time clears it")

	require.NoError(t, tx.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: e.consumer, Source: "crm", ID: "missing", Outcome: "applied", ProcessedAt: ptr(at(1))}))
	e.requireNoInbox(e.consumer, "crm", "missing")
}

// InboxSetOutcomeMany changes many identities across chunk boundaries, with
// and without a processing time; identities not recorded and other
// consumers' rows are left alone.
func testSetInboxOutcomes(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	const n = 300
	var rows, others []store.InboxRow
	var outcomes []store.OutcomeRow
	for i := range n {
		r := e.inboxRow(fmt.Sprintf("src-%d", i%2), fmt.Sprintf("id-%d", i/2), i)
		r.Outcome = "applied"
		rows = append(rows, r)
		o := r
		o.Consumer += "/other"
		others = append(others, o)
	}
	_, err := tx.InboxInsertMany(ctx, append(append([]store.InboxRow{}, rows...), others...))
	require.NoError(t, err)
	want := make([]store.InboxRow, n)
	copy(want, rows)
	for i := range n {
		if i%4 == 3 {
			continue // not in this call
		}
		o := store.OutcomeRow{Identity: store.Identity{Source: rows[i].Source, ID: rows[i].ID}, Outcome: seqboxtype.Outcome(fmt.Sprintf("outcome-%d", i%5))}
		if i%3 != 0 {
			o.ProcessedAt = ptr(at(1000 + i))
		}
		outcomes = append(outcomes, o)
		want[i].Outcome, want[i].ProcessedAt = o.Outcome, o.ProcessedAt
		if i%10 == 0 {
			outcomes = append(outcomes, store.OutcomeRow{Identity: store.Identity{Source: "nowhere", ID: fmt.Sprint(i)}, Outcome: "applied"})
		}
	}
	require.NoError(t, tx.InboxSetOutcomeMany(ctx, store.InboxSetOutcomeManyParams{Consumer: e.consumer, Rows: outcomes}))
	for i, w := range want {
		e.requireInbox(w, "row %d", i)
	}
	for _, o := range others {
		e.requireInbox(o, "another consumer's identity is untouched")
	}
	require.Zero(t, e.count("seqbox_inbox", "source = $2", "nowhere"), "no row is created")
	require.NoError(t, tx.InboxSetOutcomeMany(ctx, store.InboxSetOutcomeManyParams{

		// DeleteInbox forgets one identity, which can then be inserted again.
		Consumer: e.consumer, Rows: nil}))
}

func testDeleteInbox(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	r, keep := e.inboxRow("crm", "1", 1), e.inboxRow("crm", "2", 2)
	other := r
	other.Consumer += "/other"
	for _, row := range []store.InboxRow{r, keep, other} {
		_, err := tx.InboxInsert(ctx, row)
		require.NoError(t, err)
	}
	require.NoError(t, tx.InboxDelete(ctx, store.MessageRef{Consumer: e.consumer, Source: "crm", ID: "1"}))
	e.requireNoInbox(e.consumer, "crm", "1")
	e.requireInbox(keep)
	e.requireInbox(other)
	require.NoError(t, tx.InboxDelete(ctx, store.MessageRef{Consumer: e.consumer, Source: "crm", ID: "1"}), "deleting what is gone is no error")
	ok, err := tx.InboxInsert(ctx, r)
	require.NoError(t, err)
	require.True(t, ok, "a forgotten identity is new again")
}

// ClaimBusinessKey lets one identity per consumer claim a business key.
func testClaimBusinessKey(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	ok, err := tx.BusinessKeyClaim(ctx, store.BusinessKeyClaimParams{Consumer: e.consumer, BusinessKey: "invoice-7", Source: "crm", ID: "1", At: at(1)})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = tx.BusinessKeyClaim(ctx, store.BusinessKeyClaimParams{Consumer: e.consumer, BusinessKey: "invoice-7", Source: "crm", ID: "2", At: at(2)})
	require.NoError(t, err)
	require.False(t, ok, "another identity with the same business key")
	ok, err = tx.BusinessKeyClaim(ctx, store.BusinessKeyClaimParams{Consumer: e.consumer, BusinessKey: "invoice-7", Source: "crm", ID: "1", At: at(3)})
	require.NoError(t, err)
	require.False(t, ok, "the same claim again")
	ok, err = tx.BusinessKeyClaim(ctx, store.BusinessKeyClaimParams{Consumer: e.consumer + "/other", BusinessKey: "invoice-7", Source: "crm", ID: "2", At: at(4)})
	require.NoError(t, err)
	require.True(t, ok, "another consumer claims for itself")
	ok, err = tx.BusinessKeyClaim(ctx, store.BusinessKeyClaimParams{Consumer: e.consumer, BusinessKey: "invoice-8", Source: "crm", ID: "2", At: at(5)})
	require.NoError(t, err)
	require.True(t, ok, "another business key")

	var source, id string
	var applied int64
	require.NoError(t, tx.SQL().QueryRowContext(ctx, `SELECT source, id, applied_at FROM seqbox_business_keys
		WHERE consumer = $1 AND businesskey = $2`, e.consumer, "invoice-7").Scan(&source, &id, &applied))
	require.Equal(t, []any{"crm", "1", at(1)}, []any{source, id, time.UnixMicro(applied).UTC()}, "the first claim stays")
}

// InboxGetMany reads the recorded identities among those asked, exactly as
// InboxGet reads each, and leaves out the ones never recorded, another
// consumer's included.
func testInboxGetMany(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	got, err := tx.InboxGetMany(ctx, store.InboxGetManyParams{Consumer: e.consumer})
	require.NoError(t, err)
	require.Empty(t, got, "nothing asked")

	var want []store.InboxRow
	var ask []store.Identity
	for i := range 300 { // more than one statement's worth on SQLite
		r := e.inboxRow("crm", fmt.Sprintf("m-%d", i), i)
		if i%3 == 0 {
			r.ObjectVersion, r.ProcessedAt = nil, nil
		}
		ok, err := tx.InboxInsert(ctx, r)
		require.NoError(t, err)
		require.True(t, ok)
		want = append(want, r)
		ask = append(ask, store.Identity{Source: r.Source, ID: r.ID}, store.Identity{Source: "crm", ID: fmt.Sprintf("absent-%d", i)})
	}
	other := e.inboxRow("erp", "x", 1)
	other.Consumer = e.consumer + "-other"
	_, err = tx.InboxInsert(ctx, other)
	require.NoError(t, err)
	ask = append(ask, store.Identity{Source: "erp", ID: "x"})

	got, err = tx.InboxGetMany(ctx, store.InboxGetManyParams{Consumer: e.consumer, IDs: ask})
	require.NoError(t, err)
	require.Len(t, got, len(want), "the recorded identities, and none of the absent or another consumer's")
	for _, r := range want {
		one, err := tx.InboxGet(ctx, store.MessageRef{Consumer: r.Consumer, Source: r.Source, ID: r.ID})
		require.NoError(t, err)
		require.Equal(t, one, got[store.Identity{Source: r.Source, ID: r.ID}], "%s/%s as InboxGet reads it", r.Source, r.ID)
		require.Equal(t, r, one)
	}
}

// InboxList finds a consumer's identities by tenant, cause and contract,
// newest first and at most Limit of them; no filter is refused.
func testInboxList(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	var rows []store.InboxRow
	for n := range 6 {
		r := e.inboxRow("crm", fmt.Sprintf("l%d", n), 100+n)
		r.Tenant = []string{"acme", "globex"}[n%2]
		r.CausationID = []string{"CMD-1", "CMD-2", ""}[n%3]
		r.ContractVersion = []string{"v1", "", "", "v2"}[n%4]
		rows = append(rows, r)
	}
	other := e.inboxRow("crm", "elsewhere", 200)
	other.Consumer += "/other"
	other.Tenant, other.CausationID = "acme", "CMD-1"
	inserted, err := tx.InboxInsertMany(ctx, append(rows, other))
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true, true, true, true}, inserted)

	ids := func(p store.InboxListParams) []string {
		t.Helper()
		p.Consumer = e.consumer
		got, err := tx.InboxList(ctx, p)
		require.NoError(t, err)
		var out []string
		for _, r := range got {
			require.Equal(t, rows[r.ID[1]-'0'], r, "every column of a listed row")
			out = append(out, r.ID)
		}
		return out
	}
	require.Equal(t, []string{"l4", "l2", "l0"}, ids(store.InboxListParams{Tenant: "acme", Limit: 10}), "newest first")
	require.Equal(t, []string{"l4", "l2"}, ids(store.InboxListParams{Tenant: "acme", Limit: 2}))
	require.Equal(t, []string{"l3", "l0"}, ids(store.InboxListParams{CausationID: "CMD-1", Limit: 10}))
	require.Equal(t, []string{"l3"}, ids(store.InboxListParams{Tenant: "globex", CausationID: "CMD-1", Limit: 10}))
	require.Equal(t, []string{"l4", "l0"}, ids(store.InboxListParams{DataSchema: "v1", Limit: 10}))
	require.Equal(t, []string{"l3"}, ids(store.InboxListParams{DataSchema: "v2", CausationID: "CMD-1", Limit: 10}))
	require.Empty(t, ids(store.InboxListParams{Tenant: "initech", Limit: 10}))
	_, err = tx.InboxList(ctx, store.InboxListParams{Consumer: e.consumer, Limit: 10})
	require.Error(t, err, "neither a tenant nor a cause")
}
