package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// pipelines reports whether st's transactions are store.Pipeliners.
func pipelines(t *testing.T, st store.Store) bool {
	tx, err := st.Begin(context.Background())
	require.NoError(t, err)
	defer tx.Rollback()
	_, ok := tx.(store.Pipeliner)
	return ok
}

// A store whose transactions pipeline (store.Pipeliner) runs the
// statements in order in the transaction, says the rows each affected,
// and on a failure names the statement and keeps the rows of those
// before it.
func testPipeline(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	pl := e.tx.(store.Pipeliner)
	ins := `INSERT INTO seqbox_decisions (consumer, source, id, decision, decided_at) VALUES ($1, 'crm', $2, $3, 0)`
	affected, err := pl.Pipeline(e.ctx, []store.Statement{
		{Query: ins, Args: []any{e.consumer, "1", []byte("one")}},
		{Query: ins, Args: []any{e.consumer, "2", []byte("two")}},
		{Query: `UPDATE seqbox_decisions SET decided_at = 1 WHERE consumer = $1`, Args: []any{e.consumer}},
	})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 1, 2}, affected)
	d, err := e.tx.DecisionGet(e.ctx, store.MessageRef{Consumer: e.consumer, Source: "crm", ID: "2"})
	require.NoError(t, err)
	require.Equal(t, []byte("two"), d.Value, "the pipeline ran in the transaction")

	affected, err = pl.Pipeline(e.ctx, []store.Statement{
		{Query: ins, Args: []any{e.consumer, "3", []byte("three")}},
		{Query: ins, Args: []any{e.consumer, "1", []byte("again")}},
		{Query: ins, Args: []any{e.consumer, "4", []byte("four")}},
	})
	var pe *store.PipelineError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 1, pe.Index)
	require.Equal(t, ins, pe.Query)
	require.Equal(t, []int64{1}, affected)
}

// AuditStatement, sent in a pipeline, writes what AuditInsert writes: an
// audit row, or a duplicate's count on its inbox row.
func testPipelineAudit(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	pl := e.tx.(store.Pipeliner)
	_, err := e.tx.InboxInsert(e.ctx, e.inboxRow("crm", "1", 1))
	require.NoError(t, err)
	at := time.UnixMicro(time.Now().UnixMicro()).UTC()
	v1, v2 := int64(1), int64(2)
	stale := store.AuditRow{Consumer: e.consumer, Source: "crm", ID: "0", PartitionKey: "k", ReceivedVersion: &v1, CurrentVersion: &v2,
		Outcome: seqboxtype.Stale, Reason: "older", NextAction: "none", At: at, PayloadHash: "h"}
	dup := store.AuditRow{Consumer: e.consumer, Source: "crm", ID: "1", Outcome: seqboxtype.Duplicate, At: at}
	affected, err := pl.Pipeline(e.ctx, []store.Statement{pl.AuditStatement(stale), pl.AuditStatement(dup), pl.AuditStatement(dup)})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 1, 1}, affected)
	require.Equal(t, []store.AuditRow{stale}, e.auditRows())
	n, last := e.duplicates("crm", "1")
	require.Equal(t, 2, n)
	require.Equal(t, at, last)
}

// KeyLockInsertMany answers as KeyLockMany then InboxInsertMany do: the
// keys that exist, each as Tx.Key reads it (flags included), and which
// identities went in; with no keys or no rows, the part that has some.
func testPipelineKeyLockInsert(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	pl := e.tx.(store.Pipeliner)
	e.ensureKeys(at(1), "a", "b", "c")
	e.park(e.parked("a", "crm", "p1", nil, seqboxtype.ParkHeld, 1))
	e.retry("b", "crm", "r1", "boom", 1)
	_, err := e.tx.InboxInsert(e.ctx, e.inboxRow("crm", "old", 1))
	require.NoError(t, err)

	rows := []store.InboxRow{e.inboxRow("crm", "new", 2), e.inboxRow("crm", "old", 3), e.inboxRow("crm", "new2", 4)}
	keys, inserted, err := pl.KeyLockInsertMany(e.ctx, store.KeyLockManyParams{Consumer: e.consumer, Keys: []string{"b", "a", "missing", "a", "c"}}, rows)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true}, inserted)
	require.Equal(t, map[string]store.KeyState{"a": e.key("a"), "b": e.key("b"), "c": e.key("c")}, keys)
	require.True(t, keys["a"].HasParked)
	require.True(t, keys["b"].HasRetries)
	require.False(t, keys["c"].HasParked || keys["c"].HasRetries)
	e.requireInbox(rows[2], "an identity the pipeline inserted")

	keys, inserted, err = pl.KeyLockInsertMany(e.ctx, store.KeyLockManyParams{Consumer: e.consumer}, []store.InboxRow{e.inboxRow("crm", "new", 5)})
	require.NoError(t, err)
	require.Empty(t, keys)
	require.Equal(t, []bool{false}, inserted)
	keys, inserted, err = pl.KeyLockInsertMany(e.ctx, store.KeyLockManyParams{Consumer: e.consumer, Keys: []string{"c"}}, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]store.KeyState{"c": e.key("c")}, keys)
	require.Empty(t, inserted)
}

// KeyAdvanceStatement, sent in a pipeline, moves each key as KeyAdvanceMany
// does (from prev to next when it still is prev, a key named twice at most
// once), and the rows it affects are the moves won.
func testPipelineKeyAdvance(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	pl := e.tx.(store.Pipeliner)
	e.ensureKeys(at(1), "a", "b", "c")
	moves := []store.KeyMove{
		{Key: "a", Next: 1},                      // wins
		{Key: "b", Prev: ptr(int64(1)), Next: 2}, // b has no version: loses
		{Key: "a", Next: 5},                      // a named again: no second move
		{Key: "c", Next: 3},                      // wins
		{Key: "missing", Next: 1},                // no row
	}
	affected, err := pl.Pipeline(e.ctx, []store.Statement{pl.KeyAdvanceStatement(store.KeyAdvanceManyParams{Consumer: e.consumer, Moves: moves, At: at(2)})})
	require.NoError(t, err)
	require.Equal(t, []int64{2}, affected)
	require.Equal(t, store.KeyState{Consumer: e.consumer, Key: "a", Version: ptr(int64(1)), Baseline: ptr(int64(1)), UpdatedAt: at(2)}, e.key("a"))
	require.Equal(t, store.KeyState{Consumer: e.consumer, Key: "b", UpdatedAt: at(1)}, e.key("b"))
	require.Equal(t, ptr(int64(3)), e.key("c").Version)
}

// A statement's Read reads the rows it returns, in order, and its count is
// the rows returned; a Read that fails fails the pipeline at its
// statement.
func testPipelineRead(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	pl := e.tx.(store.Pipeliner)
	var got []int64
	read := func(rows store.Rows) error {
		for rows.Next() {
			var n int64
			if err := rows.Scan(&n); err != nil {
				return err
			}
			got = append(got, n)
		}
		return rows.Err()
	}
	affected, err := pl.Pipeline(e.ctx, []store.Statement{
		{Query: `SELECT n FROM generate_series(1, $1::int) AS g(n)`, Args: []any{3}, Read: read},
		{Query: `SELECT n FROM generate_series(10, $1::int) AS g(n)`, Args: []any{11}, Read: read},
	})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 2}, affected)
	require.Equal(t, []int64{1, 2, 3, 10, 11}, got)

	boom := errors.New("boom")
	_, err = pl.Pipeline(e.ctx, []store.Statement{
		{Query: `SELECT 1`, Read: read},
		{Query: `SELECT 2`, Read: func(store.Rows) error { return boom }},
		{Query: `SELECT 3`, Read: read},
	})
	var pe *store.PipelineError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 1, pe.Index)
	require.ErrorIs(t, err, boom)
}

// The statements a batch of a consumer with Decide sends in a pipeline
// read and write what their one-by-one methods do: the reads ahead, sent
// after KeyLockInsertMany's own statements, see its locks and identities
// (RetryRowsStatement, DecisionsStatement, TurnsBoundStatement against
// RetryRowsOnKeys, DecisionGetMany, TurnBoundToMany); the writes of the
// messages it stopped (InboxDeleteStatement, TurnTakeStatement,
// DecisionClaimStatement) and its retry clears (RetryClearStatement) as
// InboxDeleteMany, TurnTakeMany, DecisionClaimMany and RetryClearMany.
func testPipelineDecide(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	pl := e.tx.(store.Pipeliner)
	ctx, c := e.ctx, e.consumer
	e.ensureKeys(at(1), "a", "b")
	e.retry("a", "crm", "r1", "boom", 1)
	e.retry("a", "crm", "r2", "boom", 2)
	_, err := e.tx.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: c, Source: "crm", ID: "decided", Decision: []byte("d"), PayloadHash: "hd", At: at(2)})
	require.NoError(t, err)
	_, err = e.tx.TurnTake(ctx, store.TurnTakeParams{Consumer: c, Source: "crm", ID: "bound", PartitionKey: "b", PayloadHash: "hb", At: at(2)})
	require.NoError(t, err)

	// Reads ahead: n1 and n2 go in with the pipeline, and the reads after
	// them see them.
	rows := []store.InboxRow{e.inboxRow("crm", "n1", 3), e.inboxRow("crm", "n2", 3)}
	ids := []store.Identity{{Source: "crm", ID: "decided"}, {Source: "crm", ID: "bound"}, {Source: "crm", ID: "n1"}, {Source: "crm", ID: "none"}}
	ref := store.IdentitiesRef{Consumer: c, IDs: ids}
	retryIDs, decisions, bound := map[string][]store.Identity{}, map[store.Identity]store.Decision{}, map[store.Identity]string{}
	_, inserted, err := pl.KeyLockInsertMany(ctx, store.KeyLockManyParams{Consumer: c, Keys: []string{"a", "b"}}, rows,
		pl.RetryRowsStatement(store.KeysRef{Consumer: c, Keys: []string{"b", "a", "missing", "a"}}, retryIDs),
		pl.DecisionsStatement(ref, decisions), pl.TurnsBoundStatement(ref, bound))
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, inserted)
	wantRetries, err := e.tx.RetryRowsOnKeys(ctx, store.KeysRef{Consumer: c, Keys: []string{"a", "b", "missing"}})
	require.NoError(t, err)
	require.Len(t, retryIDs["a"], 2)
	require.ElementsMatch(t, wantRetries["a"], retryIDs["a"])
	require.Equal(t, len(wantRetries), len(retryIDs))
	wantDecisions, err := e.tx.DecisionGetMany(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, wantDecisions, decisions)
	require.Len(t, decisions, 1)
	wantBound, err := e.tx.TurnBoundToMany(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, wantBound, bound)
	require.Equal(t, map[store.Identity]string{{Source: "crm", ID: "bound"}: "hb"}, bound)

	// The writes of the stopped messages: n1's row taken back, turns for
	// n1 and for bound (held by another copy: not taken), claims for n1
	// and for a message another owner claims; r1's retry row cleared.
	_, err = e.tx.DecisionClaim(ctx, store.DecisionClaimParams{Consumer: c, Source: "crm", ID: "theirs", Owner: "other", Now: at(3), Until: at(9)})
	require.NoError(t, err)
	taken, claimed := map[store.Identity]bool{}, map[store.Identity]bool{}
	n1, theirs := store.Identity{Source: "crm", ID: "n1"}, store.Identity{Source: "crm", ID: "theirs"}
	turns := []store.TurnRow{{Source: "crm", ID: "n1", PartitionKey: "a", PayloadHash: "h1"}, {Source: "crm", ID: "bound", PartitionKey: "b", PayloadHash: "other"},
		{Source: "crm", ID: "n1", PartitionKey: "a", PayloadHash: "h1"}}
	_, err = pl.Pipeline(ctx, []store.Statement{
		pl.InboxDeleteStatement(store.IdentitiesRef{Consumer: c, IDs: []store.Identity{n1}}),
		pl.TurnTakeStatement(store.TurnTakeManyParams{Consumer: c, At: at(4), Turns: turns}, taken),
		pl.DecisionClaimStatement(store.DecisionClaimManyParams{Consumer: c, IDs: []store.Identity{n1, theirs, n1}, Owner: "me", Now: at(4), Until: at(8)}, claimed),
		pl.RetryClearStatement(store.RetryClearManyParams{Consumer: c, IDs: []store.Identity{{Source: "crm", ID: "r1"}}}),
	})
	require.NoError(t, err)
	e.requireNoInbox(c, "crm", "n1")
	e.requireInbox(rows[1], "a row not named stays")
	require.Equal(t, map[store.Identity]bool{n1: true}, taken, "bound to another copy: not taken")
	h, err := e.tx.TurnBoundTo(ctx, store.MessageRef{Consumer: c, Source: "crm", ID: "bound"})
	require.NoError(t, err)
	require.Equal(t, "hb", h, "and its turn is left alone")
	require.Equal(t, map[store.Identity]bool{n1: true}, claimed, "another owner's live claim is not taken")
	left, err := e.tx.RetryRowsOnKeys(ctx, store.KeysRef{Consumer: c, Keys: []string{"a"}})
	require.NoError(t, err)
	require.ElementsMatch(t, []store.Identity{{Source: "crm", ID: "r2"}, n1}, left["a"], "r1 cleared, n1's turn taken")
}

// GatewayEnvelopeStatement, sent in a pipeline, keeps what
// GatewayEnvelopeInsert keeps: the first envelope of an identity.
func testPipelineGatewayEnvelope(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	pl := e.tx.(store.Pipeliner)
	first := store.GatewayEnvelope{Consumer: e.consumer, Source: "s", ID: "1", Envelope: []byte(`{"id":"1"}`), BusinessKey: "bk", AppliedAt: at(1)}
	second := first
	second.Envelope, second.AppliedAt = []byte(`second`), at(2)
	affected, err := pl.Pipeline(e.ctx, []store.Statement{pl.GatewayEnvelopeStatement(first), pl.GatewayEnvelopeStatement(second)})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 0}, affected)
	require.Equal(t, []byte(`{"id":"1"}`), e.envelope("1"), "the first envelope stays")
}
