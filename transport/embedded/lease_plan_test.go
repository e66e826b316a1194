package embedded

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/ddl/ddltest"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/seqbox/seqbox/transport"
	"github.com/stretchr/testify/require"
)

// On PostgreSQL a receive walks the queue's index in seq order and stops
// after a batch, whatever the backlog and however stale the statistics
// (right after a burst of publishes they describe an empty table): no
// bitmap scan of every ready row, no sort, no scan of the whole table to
// join the locked rows back.
func TestPostgresLeasePlanWalksTheIndex(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, pgtest.URL(t), Config{Name: "plan"})
	require.NoError(t, err)
	defer q.Close()
	bodies := make([][]byte, 1000)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"n":%d}`, i)
	}
	for range 20 {
		require.NoError(t, q.PublishBatch(ctx, bodies))
	}
	_, err = q.Receive(ctx, 512) // a leased head, as in flight
	require.NoError(t, err)
	requireLeasePlan(t, q, "plan")
}

// A queue autovacuum has not visited yet, with a few live rows among the
// dead ones of the deliveries acknowledged so far, is the state of a busy
// queue between two autovacuum rounds. The planner, without statistics,
// took the table for a few pages, and the receive read all of it to find
// the rows its subquery had locked. It must still update them by tuple id.
func TestPostgresLeasePlanOnAFreshQueue(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, pgtest.URL(t), Config{Name: "fresh"})
	require.NoError(t, err)
	defer q.Close()
	require.NoError(t, q.PublishBatch(ctx, [][]byte{[]byte(`{"n":1}`), []byte(`{"n":2}`), []byte(`{"n":3}`)}))
	ds, err := q.Receive(ctx, 2)
	require.NoError(t, err)
	require.Len(t, ds, 2)
	for _, d := range ds {
		require.NoError(t, d.Ack(ctx))
	}
	requireLeasePlan(t, q, "fresh")
}

// requireLeasePlan explains q's receive statement on q's own pool, as a
// receive runs it, and requires the walk of the heads and the
// update by tuple id, with no group look-up, sequential scan, bitmap scan
// or sort.
func requireLeasePlan(t *testing.T, q *Queue, name string) {
	t.Helper()
	now := time.Now().UnixMicro()
	rows, err := q.db.QueryContext(context.Background(), "EXPLAIN "+q.leaseStatement(), "token", now+1, name, now, 512)
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan = append(plan, line)
	}
	require.NoError(t, rows.Err())
	text := strings.Join(plan, "\n")
	require.Contains(t, text, "Tid Scan", text)
	require.Contains(t, text, "Index Scan using seqbox_queue_order", text)
	// The walk stays in the heads' range of the index (heads.go): no
	// grouped message's predecessors are looked up.
	require.Contains(t, text, "AND (behind = 0)", text)
	require.NotContains(t, text, "seqbox_queue_group", text)
	for _, bad := range []string{"Seq Scan", "Bitmap", "Sort"} {
		require.NotContains(t, text, bad, text)
	}
}

// On PostgreSQL a receive's lease is a heap-only update: it adds no index
// entry (ensureHOT), and reopening the queue changes nothing more.
func TestPostgresLeaseIsHeapOnly(t *testing.T) {
	ctx := context.Background()
	u := pgtest.URL(t)
	q, err := Open(ctx, u, Config{Name: "hot"})
	require.NoError(t, err)
	defer q.Close()
	bodies := make([][]byte, 300)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"n":%d}`, i)
	}
	require.NoError(t, q.PublishBatch(ctx, bodies))
	tx, err := q.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback() //nolint:errcheck // read-only probe
	now := time.Now().UnixMicro()
	res, err := tx.ExecContext(ctx, q.leaseStatement(), "token", now+1, "hot", now, 300)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 300, n)
	var upd, hot int64
	require.NoError(t, tx.QueryRowContext(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_catalog.pg_stat_xact_user_tables
		WHERE relid = 'seqbox_queue'::regclass`).Scan(&upd, &hot))
	require.EqualValues(t, 300, upd)
	require.EqualValues(t, upd, hot, "every leased row updated in place")
	require.NoError(t, tx.Rollback())

	again, err := Open(ctx, u, Config{Name: "hot"})
	require.NoError(t, err)
	require.NoError(t, again.Close())
}

// On SQLite an ack's statement is one text whatever the batch's size (its
// seqs and leases are JSON arrays), one statement covers the
// deliveries of several receives, it deletes exactly the rows it names
// that still hold their lease (a seq with another receive's lease is left
// alone), and it finds them by primary key.
func TestSQLiteAckIsOneTextAndDeletesByKey(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"), Config{Name: "ack", Wait: time.Millisecond})
	require.NoError(t, err)
	defer q.Close()
	bodies := make([][]byte, 1500)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"n":%d}`, i)
	}
	require.NoError(t, q.PublishBatch(ctx, bodies))
	ds, err := q.Receive(ctx, 1000)
	require.NoError(t, err)
	require.Len(t, ds, 1000)
	var every2nd []transport.Delivery
	for i := 0; i < len(ds); i += 2 {
		every2nd = append(every2nd, ds[i])
	}

	short := ackStatements(false, true, []leasedRow{{seq: 1, token: "aa"}})
	long := ackStatements(false, true, []leasedRow{{seq: 1, token: "aa", grouped: true}, {seq: 5, token: "aa", grouped: true}, {seq: 9, token: "bb", grouped: true}})
	require.Len(t, long, 1, "one statement for every receive's deliveries")
	require.Equal(t, short[0].text, long[0].text, "one text whatever the count")
	require.Equal(t, []any{"[1,5,9]", `["aa","bb"]`}, long[0].args)
	twoReceives := []leasedRow{{seq: 1, token: "aa", grouped: true}, {seq: 5, token: "aa", grouped: true}, {seq: 9, token: "bb", grouped: true}}
	require.Len(t, ackStatements(true, true, twoReceives), 3,
		"one statement per receive on PostgreSQL, after one that locks every group in order")
	require.Len(t, ackStatements(true, false, twoReceives), 2,
		"outside a transaction each statement is its own: no lock taken first")
	require.Len(t, ackStatements(true, true, twoReceives[:2]), 1, "one receive: its statement locks its groups")

	require.NoError(t, q.AckBatch(ctx, every2nd))
	ready, leased, err := q.Depth(ctx)
	require.NoError(t, err)
	require.Equal(t, 500, ready, "the ones never received")
	require.Equal(t, 500, leased, "the odd ones, received and not acknowledged")
	err = q.AckBatch(ctx, every2nd[:3])
	require.ErrorIs(t, err, transport.ErrLeaseLost, "acknowledged already")
	require.ErrorContains(t, err, "3 of 3 acks")

	// Two receives: a seq named with the other receive's lease is left
	// alone, and one ack of both receives' deliveries deletes each.
	r1, err := q.Receive(ctx, 2)
	require.NoError(t, err)
	r2, err := q.Receive(ctx, 2)
	require.NoError(t, err)
	require.Len(t, r1, 2)
	require.Len(t, r2, 2)
	a, b := r1[0].(*delivery), r2[0].(*delivery)
	require.NotEqual(t, a.token, b.token)
	for _, crossed := range [][]leasedRow{{{seq: a.seq, token: b.token}}, {{seq: b.seq, token: a.token}}} {
		st := ackStatements(false, true, crossed)[0]
		res, err := q.db.ExecContext(ctx, st.text, st.args...)
		require.NoError(t, err)
		n, err := res.RowsAffected()
		require.NoError(t, err)
		require.Zero(t, n, "a seq under another receive's lease")
	}
	require.NoError(t, q.AckBatch(ctx, []transport.Delivery{r1[0], r2[0], r1[1], r2[1]}))
	ready, leased, err = q.Depth(ctx)
	require.NoError(t, err)
	require.Equal(t, 1000-4, ready+leased, "the four acknowledged are gone")

	text := sqlitePlan(t, q, long[0].text, long[0].args...)
	require.Contains(t, text, "USING INTEGER PRIMARY KEY", text)
	require.NotContains(t, text, "SCAN seqbox_queue", text)
}

// sqlitePlan is SQLite's query plan for stmt with args, a line per step.
func sqlitePlan(t *testing.T, q *Queue, stmt string, args ...any) string {
	t.Helper()
	plan, err := ddltest.SQLitePlan(context.Background(), q.db, stmt, args...)
	require.NoError(t, err)
	return plan
}

// On PostgreSQL an ack takes group locks only for grouped messages: the
// core's ungrouped messages pay no lock statement and no look for groups.
func TestPostgresAckOfUngroupedMessagesTakesNoGroupLock(t *testing.T) {
	for _, inTx := range []bool{true, false} {
		sts := ackStatements(true, inTx, []leasedRow{{seq: 1, token: "aa"}, {seq: 5, token: "bb"}})
		require.Len(t, sts, 2, "a statement per receive, none first")
		for _, st := range sts {
			require.NotContains(t, st.text, "pg_advisory_xact_lock", "no group among the rows")
		}
	}
	mixed := ackStatements(true, true, []leasedRow{{seq: 1, token: "aa", grouped: true}, {seq: 5, token: "bb"}, {seq: 7, token: "cc", grouped: true}})
	require.Len(t, mixed, 4, "two statements lock groups: every group's lock first")
	require.Equal(t, []any{[]int64{1, 7}}, mixed[0].args, "the grouped rows' locks only")
	require.Contains(t, mixed[1].text, "pg_advisory_xact_lock")
	require.NotContains(t, mixed[2].text, "pg_advisory_xact_lock")
	require.Contains(t, mixed[3].text, "pg_advisory_xact_lock")
}

// A delivery knows whether its message is in a group, on both stores:
// from a receive, and from TakeNext (always a group's).
func TestDeliveriesKnowTheirGroup(t *testing.T) {
	for name, url := range bothStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			q, err := Open(ctx, url(t), Config{Name: "knows-group", Wait: time.Millisecond})
			require.NoError(t, err)
			defer q.Close()
			require.NoError(t, q.Publish(ctx, []byte(`{"n":0}`)))
			require.NoError(t, q.PublishGrouped(ctx, [][]byte{[]byte(`{"n":1}`), []byte(`{"n":2}`)}, []string{"g", "g"}))
			ds, err := q.Receive(ctx, 10)
			require.NoError(t, err)
			require.Len(t, ds, 2, "the ungrouped message and the group's head")
			require.Empty(t, ds[0].(*delivery).group)
			require.Equal(t, "g", ds[1].(*delivery).group)
			next, err := q.TakeNext(ctx, ds[1:])
			require.NoError(t, err)
			require.Len(t, next, 1)
			require.Equal(t, "g", next[0].(*delivery).group)
			require.Same(t, next[0], transport.Delivery(ds[1].(*delivery).next.Load()), "its next is taken")
			require.NoError(t, q.AckBatch(ctx, append(ds, next...)))
			ready, leased, err := q.Depth(ctx)
			require.NoError(t, err)
			require.Zero(t, ready+leased, "every ack deleted its row")
		})
	}
}

// TakeNext of heads of no group takes nothing, and asks nothing of the
// database: an ungrouped message has no next one. The decide pipe asks it
// for every stage's heads whose next message it does not hold, which on
// a queue without groups was a write statement in SQLite's one writer's
// turn, before every stage's transaction, for nothing.
func TestTakeNextOfUngroupedHeadsRunsNoStatement(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"), Config{Name: "ungrouped", Wait: time.Millisecond})
	require.NoError(t, err)
	defer q.Close()
	require.NoError(t, q.PublishBatch(ctx, [][]byte{[]byte("a"), []byte("b")}))
	ds, err := q.Receive(ctx, 1)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	stop, ok := sqlitedb.RecordStatements()
	require.True(t, ok, "another recording runs")
	next, err := q.TakeNext(ctx, ds)
	ran := stop()
	require.NoError(t, err)
	require.Empty(t, next)
	require.Empty(t, ran, "statements run for no group")
}

// An idle Receive's look, run at every poll, is compiled once.
func TestIdleLookIsCompiledOnce(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"), Config{Name: "idle", PollInterval: time.Millisecond, Wait: 20 * time.Millisecond})
	require.NoError(t, err)
	defer q.Close()
	stop, ok := sqlitedb.RecordStatements()
	require.True(t, ok, "another recording runs")
	ds, err := q.Receive(ctx, 1)
	ran := stop()
	require.NoError(t, err)
	require.Empty(t, ds)
	var look *sqlitedb.StatementTime
	for _, s := range ran {
		if strings.HasPrefix(s.Query, "SELECT 1 FROM seqbox_queue") {
			look = &s
		}
	}
	require.NotNil(t, look, "the idle Receive looked")
	require.Greater(t, look.Count, int64(2), "a look a poll")
	require.LessOrEqual(t, look.Prepares, int64(1), "compiled %d times in %d looks", look.Prepares, look.Count)
}
