package drivertest

import (
	"fmt"
	"testing"

	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// outboxTests cover the outbox's methods, each in its own transaction:
// the outbox is one queue for every consumer, so a test sees only what
// its own transaction wrote.
var outboxTests = []driverTest{
	{"OutboxInsertAndListReady", testOutboxInsert},
	{"OutboxMarkPublished", testOutboxMarkPublished},
	{"OutboxRefusals", testOutboxRefusals},
	{"OutboxBacklog", testOutboxBacklog},
	{"OutboxLease", testOutboxLease},
	{"OutboxPrune", testOutboxPrune},
	{"OutboxPruneLowestSeqFirst", testOutboxPruneLowestSeqFirst},
}

// OutboxPrune removes events published before Before, lowest Seq first
// and at most Limit; one published later stays, and so does an
// unpublished one however old.
func testOutboxPrune(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	old1, old2, old3 := e.emit("k1", "old1", 1), e.emit("k2", "old2", 1), e.emit("k3", "old3", 1)
	waiting := e.emit("k4", "waiting", 0)
	recent := e.emit("k1", "recent", 4)
	require.NoError(t, e.tx.OutboxMarkPublished(e.ctx, store.OutboxMarkPublishedParams{Seqs: []int64{old1, old2, old3}, At: at(2)}))
	require.NoError(t, e.tx.OutboxMarkPublished(e.ctx, store.OutboxMarkPublishedParams{Seqs: []int64{recent}, At: at(5)}))
	left := func() []int64 {
		return column[int64](t)(e.tx.SQL().QueryContext(e.ctx, `SELECT seq FROM seqbox_outbox WHERE origin = $1 ORDER BY seq`, e.consumer))
	}
	n, err := e.tx.OutboxPrune(e.ctx, store.OutboxPruneParams{Before: at(3), Limit: 2})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, []int64{old3, waiting, recent}, left(), "the lowest two first")
	n, err = e.tx.OutboxPrune(e.ctx, store.OutboxPruneParams{Before: at(3), Limit: 10})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Equal(t, []int64{waiting, recent}, left(), "the unpublished one and the one published since stay")
}

// emit inserts an event of key at at(n) and returns its Seq.
func (e *txEnv) emit(key, id string, n int) int64 {
	e.t.Helper()
	seq, err := e.tx.OutboxInsert(e.ctx, store.OutboxEvent{Origin: e.consumer, PartitionKey: key, EventID: id,
		Body: []byte(`{"id":"` + id + `"}`), CreatedAt: at(n)})
	require.NoError(e.t, err)
	return seq
}

// ready lists the ready events' ids at at(n).
func (e *txEnv) ready(n, limit int) []string {
	e.t.Helper()
	evs, err := e.tx.OutboxListReady(e.ctx, store.OutboxListReadyParams{Now: at(n), Limit: limit})
	require.NoError(e.t, err)
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.EventID)
	}
	return ids
}

func testOutboxInsert(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	a := e.emit("k1", "a", 1)
	b := e.emit("k2", "b", 2)
	require.Greater(t, b, a)
	evs, err := e.tx.OutboxListReady(e.ctx, store.OutboxListReadyParams{Now: at(3), Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []store.OutboxEvent{
		{Seq: a, Origin: e.consumer, PartitionKey: "k1", EventID: "a", Body: []byte(`{"id":"a"}`), CreatedAt: at(1)},
		{Seq: b, Origin: e.consumer, PartitionKey: "k2", EventID: "b", Body: []byte(`{"id":"b"}`), CreatedAt: at(2)},
	}, evs)
	require.Equal(t, []string{"a"}, e.ready(3, 1), "at most Limit, in Seq order")
}

func testOutboxMarkPublished(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	var seqs []int64
	for i := range 130 { // more than one statement's worth
		seqs = append(seqs, e.emit("k", fmt.Sprint("e", i), 1))
	}
	e.emit("k", "last", 2)
	require.NoError(t, e.tx.OutboxMarkPublished(e.ctx, store.OutboxMarkPublishedParams{Seqs: seqs, At: at(3)}))
	require.NoError(t, e.tx.OutboxMarkPublished(e.ctx, store.OutboxMarkPublishedParams{At: at(3)}), "nothing to mark")
	require.Equal(t, []string{"last"}, e.ready(4, 500))
	b, err := e.tx.OutboxBacklog(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, b.Pending)
}

func testOutboxRefusals(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	head := e.emit("k1", "head", 1)
	e.emit("k1", "behind", 2)
	e.emit("k2", "other", 3)
	require.NoError(t, e.tx.OutboxRefusalRecord(e.ctx, store.OutboxRefusalRecordParams{Seq: head, Error: "broker down", NextAttempt: at(10)}))
	require.Equal(t, []string{"other"}, e.ready(5, 10), "a refused head holds up its own key only")
	require.Equal(t, []string{"head", "behind", "other"}, e.ready(10, 10), "until its next attempt")
	require.NoError(t, e.tx.OutboxRefusalRecord(e.ctx, store.OutboxRefusalRecordParams{Seq: head, Error: "still down", NextAttempt: at(20)}))
	refusals, err := e.tx.OutboxRefusalList(e.ctx)
	require.NoError(t, err)
	require.Equal(t, []store.OutboxRefusal{{PartitionKey: "k1", EventID: "head", Seq: head, Attempts: 2, LastError: "still down",
		Unpublished: 2, Since: at(1), NextAttempt: at(20)}}, refusals)
	require.NoError(t, e.tx.OutboxMarkPublished(e.ctx, store.OutboxMarkPublishedParams{Seqs: []int64{head}, At: at(21)}))
	refusals, err = e.tx.OutboxRefusalList(e.ctx)
	require.NoError(t, err)
	require.Empty(t, refusals, "published: it holds nothing up")
}

func testOutboxBacklog(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	b, err := e.tx.OutboxBacklog(e.ctx)
	require.NoError(t, err)
	require.Equal(t, store.OutboxBacklog{}, b)
	a := e.emit("k1", "a", 1)
	e.emit("k1", "b", 2)
	c := e.emit("k2", "c", 3)
	for range 3 {
		require.NoError(t, e.tx.OutboxRefusalRecord(e.ctx, store.OutboxRefusalRecordParams{Seq: a, Error: "x", NextAttempt: at(9)}))
	}
	require.NoError(t, e.tx.OutboxRefusalRecord(e.ctx, store.OutboxRefusalRecordParams{Seq: c, Error: "x", NextAttempt: at(9)}))
	b, err = e.tx.OutboxBacklog(e.ctx)
	require.NoError(t, err)
	require.Equal(t, store.OutboxBacklog{Pending: 3, Oldest: at(1), RefusedKeys: 2, MaxAttempts: 3}, b)
}

func testOutboxLease(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	take := func(owner string, now, until int) bool {
		ok, err := e.tx.OutboxLeaseTake(e.ctx, store.OutboxLeaseParams{Name: e.consumer, Owner: owner, Now: at(now), Until: at(until)})
		require.NoError(t, err)
		return ok
	}
	require.True(t, take("a", 0, 10), "free")
	require.True(t, take("a", 5, 15), "renewed by its owner")
	require.False(t, take("b", 14, 24), "held by another until it runs out")
	require.True(t, take("b", 16, 26), "taken over once it ran out")
	require.NoError(t, e.tx.OutboxLeaseRelease(e.ctx, store.OutboxLeaseParams{Name: e.consumer, Owner: "a"}))
	require.False(t, take("a", 17, 27), "another owner's release leaves it alone")
	require.NoError(t, e.tx.OutboxLeaseRelease(e.ctx, store.OutboxLeaseParams{Name: e.consumer, Owner: "b"}))
	require.True(t, take("a", 17, 27), "released: free at once")
}

// OutboxPrune removes the lowest seqs first even when a higher seq was
// published earlier (on PostgreSQL its updated row sits earlier in the
// heap).
func testOutboxPruneLowestSeqFirst(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	a, b, c := e.emit("k1", "a", 1), e.emit("k2", "b", 1), e.emit("k3", "c", 1)
	require.NoError(t, e.tx.OutboxMarkPublished(e.ctx, store.OutboxMarkPublishedParams{Seqs: []int64{c}, At: at(1)}))
	require.NoError(t, e.tx.OutboxMarkPublished(e.ctx, store.OutboxMarkPublishedParams{Seqs: []int64{b}, At: at(2)}))
	require.NoError(t, e.tx.OutboxMarkPublished(e.ctx, store.OutboxMarkPublishedParams{Seqs: []int64{a}, At: at(2)}))
	n, err := e.tx.OutboxPrune(e.ctx, store.OutboxPruneParams{Before: at(3), Limit: 2})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	left := column[int64](t)(e.tx.SQL().QueryContext(e.ctx, `SELECT seq FROM seqbox_outbox WHERE origin = $1 ORDER BY seq`, e.consumer))
	require.Equal(t, []int64{c}, left, "the lowest two seqs first")
}
