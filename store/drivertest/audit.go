package drivertest

import (
	"database/sql"
	"testing"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// duplicates reads the duplicate count and the time of the last one from
// an identity's inbox row.
func (e *txEnv) duplicates(source, id string) (int, time.Time) {
	e.t.Helper()
	var n int
	var last sql.NullInt64
	require.NoError(e.t, e.tx.SQL().QueryRowContext(e.ctx, `SELECT duplicates, last_duplicate_at FROM seqbox_inbox
		WHERE consumer = $1 AND source = $2 AND id = $3`, e.consumer, source, id).Scan(&n, &last))
	if !last.Valid {
		return n, time.Time{}
	}
	return n, time.UnixMicro(last.Int64).UTC()
}

// auditRows reads the test consumer's audit rows in the transaction, in
// sequence order.
func (e *txEnv) auditRows() []store.AuditRow {
	e.t.Helper()
	rows, err := e.tx.SQL().QueryContext(e.ctx, `SELECT consumer, source, id, partitionkey, received_version,
		current_version, outcome, reason, next_action, at, payload_hash FROM seqbox_audit WHERE consumer = $1 ORDER BY seq`, e.consumer)
	require.NoError(e.t, err)
	defer rows.Close()
	var out []store.AuditRow
	for rows.Next() {
		var a store.AuditRow
		var rv, cv sql.NullInt64
		var when int64
		require.NoError(e.t, rows.Scan(&a.Consumer, &a.Source, &a.ID, &a.PartitionKey, &rv, &cv, &a.Outcome,
			&a.Reason, &a.NextAction, &when, &a.PayloadHash))
		if rv.Valid {
			a.ReceivedVersion = ptr(rv.Int64)
		}
		if cv.Valid {
			a.CurrentVersion = ptr(cv.Int64)
		}
		a.At = time.UnixMicro(when).UTC()
		out = append(out, a)
	}
	require.NoError(e.t, rows.Err())
	return out
}

// A duplicate is counted on its inbox row, with the time of the last
// one, and adds no audit row.
func testAuditDuplicate(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	_, err := e.tx.InboxInsert(e.ctx, e.inboxRow("crm", "1", 1))
	require.NoError(t, err)
	n, last := e.duplicates("crm", "1")
	require.Equal(t, 0, n)
	require.True(t, last.IsZero())

	dup := store.AuditRow{Consumer: e.consumer, Source: "crm", ID: "1", PartitionKey: "order-1",
		Outcome: seqboxtype.Duplicate, Reason: "seen before", At: at(10), PayloadHash: "sha256:1"}
	require.NoError(t, e.tx.AuditInsert(e.ctx, dup))
	n, last = e.duplicates("crm", "1")
	require.Equal(t, []any{1, at(10)}, []any{n, last})
	dup.At = at(20)
	require.NoError(t, e.tx.AuditInsert(e.ctx, dup))
	n, last = e.duplicates("crm", "1")
	require.Equal(t, []any{2, at(20)}, []any{n, last})
	require.Empty(t, e.auditRows(), "a duplicate is no audit row")

	dup.ID = "never-recorded"
	require.NoError(t, e.tx.AuditInsert(e.ctx, dup), "a duplicate of an identity the inbox lost")
	require.Empty(t, e.auditRows())
	require.Zero(t, e.count("seqbox_inbox", "id = $2", "never-recorded"))
}

// Other outcomes add a row each, every field kept; a collision with a
// payload hash is recorded once per payload.
func testAuditOnce(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	collision := store.AuditRow{Consumer: e.consumer, Source: "crm", ID: "1", PartitionKey: "order-1",
		ReceivedVersion: ptr(int64(3)), CurrentVersion: ptr(int64(3)), Outcome: "collision",
		Reason: "same id, another payload", NextAction: "inspect the parked copy", At: at(1), PayloadHash: "sha256:a"}
	stale := store.AuditRow{Consumer: e.consumer, Source: "crm", ID: "2", PartitionKey: "order-1",
		ReceivedVersion: ptr(int64(1)), Outcome: "stale", Reason: "version 1 is behind 3", At: at(2), PayloadHash: "sha256:s"}
	unversioned := store.AuditRow{Consumer: e.consumer, Source: "crm", ID: "3", Outcome: "rejected", Reason: "no type", At: at(3)}
	want := []store.AuditRow{collision, stale, unversioned}
	for _, a := range want {
		require.NoError(t, e.tx.AuditInsert(e.ctx, a))
	}
	require.Equal(t, want, e.auditRows())

	again := collision
	again.At, again.Reason = at(4), "seen again"
	require.NoError(t, e.tx.AuditInsert(e.ctx, again))
	require.Equal(t, want, e.auditRows(), "the same colliding payload again adds no row")

	another := collision
	another.PayloadHash, another.At = "sha256:b", at(5)
	staleAgain := stale
	staleAgain.At = at(6)
	noHash := collision
	noHash.ID, noHash.PayloadHash, noHash.At = "4", "", at(7)
	for _, a := range []store.AuditRow{another, staleAgain, noHash, noHash} {
		require.NoError(t, e.tx.AuditInsert(e.ctx, a))
	}
	want = append(want, another, staleAgain, noHash, noHash)
	require.Equal(t, want, e.auditRows(),
		"another payload, another outcome and a collision without a hash are rows each time")

	theirs := collision
	theirs.Consumer += "/other"
	require.NoError(t, e.tx.AuditInsert(e.ctx, theirs))
	var n int
	require.NoError(t, e.tx.SQL().QueryRowContext(e.ctx, `SELECT COUNT(*) FROM seqbox_audit WHERE consumer = $1`, theirs.Consumer).Scan(&n))
	require.Equal(t, 1, n, "another consumer's collision is its own")
}

// GapInsert adds one row per decision, every field kept.
func testRecordGap(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	gaps := []store.Gap{
		{Consumer: e.consumer, Key: "order-1", FromVersion: 3, ToVersion: 5, DecidedBy: "ana", Reason: "lost upstream", At: at(1)},
		{Consumer: e.consumer, Key: "order-1", FromVersion: 3, ToVersion: 5, DecidedBy: "bob", Reason: "again", At: at(2)},
		{Consumer: e.consumer, Key: "order-2", FromVersion: 0, ToVersion: 0, DecidedBy: "sweeper", Reason: "timeout", At: at(3)},
	}
	for _, g := range gaps {
		require.NoError(t, e.tx.GapInsert(e.ctx, g))
	}
	rows, err := e.tx.SQL().QueryContext(e.ctx, `SELECT consumer, partitionkey, from_version, to_version, decided_by, reason, at
		FROM seqbox_gaps WHERE consumer = $1 ORDER BY seq`, e.consumer)
	require.NoError(t, err)
	defer rows.Close()
	var got []store.Gap
	for rows.Next() {
		var g store.Gap
		var when int64
		require.NoError(t, rows.Scan(&g.Consumer, &g.Key, &g.FromVersion, &g.ToVersion, &g.DecidedBy, &g.Reason, &when))
		g.At = time.UnixMicro(when).UTC()
		got = append(got, g)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, gaps, got)
}

// DecisionGet reads what DecisionRecord stored; the first decision of an
// identity is kept.
func testDecision(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	_, err := tx.DecisionGet(ctx, store.MessageRef{Consumer: e.consumer, Source: "crm", ID: "1"})
	require.ErrorIs(t, err, store.ErrNotFound)

	first := []byte("{\"route\":\"refund\",\"raw\":\"\x00\xff\"}")
	recorded, err := tx.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: e.consumer, Source: "crm", ID: "1", Decision: first, PayloadHash: "h1", At: at(1)})
	require.NoError(t, err)
	require.Equal(t, store.Decision{Value: first, PayloadHash: "h1"}, recorded)
	got, err := tx.DecisionGet(ctx, store.MessageRef{Consumer: e.consumer, Source: "crm", ID: "1"})
	require.NoError(t, err)
	require.Equal(t, store.Decision{Value: first, PayloadHash: "h1"}, got)

	recorded, err = tx.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: e.consumer, Source: "crm", ID: "1", Decision: []byte(`{"route":"ignore"}`), PayloadHash: "h2", At: at(2)})
	require.NoError(t, err)
	require.Equal(t, store.Decision{Value: first, PayloadHash: "h1"}, recorded, "the recorded decision is returned, not the new one, with the hash of the copy it was made for")
	require.False(t, recorded.MadeFor("h2"), "a copy with another payload learns the decision is not its own")
	got, err = tx.DecisionGet(ctx, store.MessageRef{Consumer: e.consumer, Source: "crm", ID: "1"})
	require.NoError(t, err)
	require.Equal(t, store.Decision{Value: first, PayloadHash: "h1"}, got, "the first decision stays")

	_, err = tx.DecisionGet(ctx, store.MessageRef{Consumer: e.consumer, Source: "crm", ID: "2"})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = tx.DecisionGet(ctx, store.MessageRef{Consumer: e.consumer + "/other", Source: "crm", ID: "1"})
	require.ErrorIs(t, err, store.ErrNotFound, "decisions belong to one consumer")
}
