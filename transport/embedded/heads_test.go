package embedded

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/transport"
	"github.com/stretchr/testify/require"
)

// On SQLite a receive and an idle receiver's look walk the groups' heads
// and the ungrouped messages only, in seq order: the order index's range
// of rows with no earlier message of their group (behind = 0). They look
// up no group predecessors, so a backlog behind heads in flight costs
// them nothing: with every head leased, a look used to visit each waiting
// message and probe its group (550 ms at 200,000 messages in 200 groups,
// the lease 230 ms in the one writer's turn).
func TestSQLiteReceiveWalksOnlyTheHeads(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"), Config{Name: "plan"})
	require.NoError(t, err)
	defer q.Close()
	require.NoError(t, q.PublishGrouped(ctx, [][]byte{[]byte("a1"), []byte("a2"), []byte("x")}, []string{"a", "a", ""}))
	now := time.Now().UnixMicro()
	for _, text := range []string{
		sqlitePlan(t, q, q.leaseStatement(), "token", now+1, "plan", now, 512),
		sqlitePlan(t, q, q.probeStatement(), "plan", now),
	} {
		require.Contains(t, text, "INDEX seqbox_queue_order (queue=? AND behind=?", text)
		require.NotContains(t, text, "seqbox_queue_group", text)
		require.NotContains(t, text, "TEMP B-TREE", text)
	}
}

// bothStores names a queue's database on each store: a SQLite file, and
// PostgreSQL (pgtest).
func bothStores() map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return filepath.Join(t.TempDir(), "q.db") },
		"postgres": func(t *testing.T) string { return pgtest.URL(t) },
	}
}

// Which messages are behind an earlier one of their group is kept by the
// queue's schema, whoever writes the table: a publish, a row deleted by
// hand (as a tool or a chaos run does), several rows of a group deleted
// in one statement, and a row inserted by a binary that knows nothing of
// the column (an older seqbox on the same database during an upgrade).
func TestGroupHeadsAreKeptByTheSchema(t *testing.T) {
	for name, url := range bothStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			q, err := Open(ctx, url(t), Config{Name: "heads", Wait: time.Millisecond})
			require.NoError(t, err)
			defer q.Close()
			require.NoError(t, q.PublishGrouped(ctx, [][]byte{[]byte("a1"), []byte("a2"), []byte("b1"), []byte("a3"), []byte("x")},
				[]string{"a", "a", "b", "a", ""}))
			require.Equal(t, map[string]int{"a1": 0, "a2": 1, "b1": 0, "a3": 1, "x": 0}, behind(t, q.db))

			// A head deleted by hand: the next one of its group is the head.
			_, err = q.db.ExecContext(ctx, `DELETE FROM seqbox_queue WHERE body = $1`, []byte("a1"))
			require.NoError(t, err)
			require.Equal(t, map[string]int{"a2": 0, "b1": 0, "a3": 1, "x": 0}, behind(t, q.db))

			// Rows inserted without the column, as a binary before it did.
			for _, row := range [][2]string{{"a4", "a"}, {"c1", "c"}, {"c2", "c"}} {
				_, err = q.db.ExecContext(ctx, `INSERT INTO seqbox_queue (queue, body, visible_at, enqueued_at, msg_group) VALUES ('heads', $1, 0, 0, $2)`,
					[]byte(row[0]), row[1])
				require.NoError(t, err)
			}
			require.Equal(t, map[string]int{"a2": 0, "b1": 0, "a3": 1, "x": 0, "a4": 1, "c1": 0, "c2": 1}, behind(t, q.db))

			// A group's head and the one after it deleted in one statement,
			// in either order of the rows.
			for _, bodies := range [][]string{{"a2", "a3"}, {"c2", "c1"}} {
				_, err = q.db.ExecContext(ctx, `DELETE FROM seqbox_queue WHERE body = $1 OR body = $2`, []byte(bodies[0]), []byte(bodies[1]))
				require.NoError(t, err)
			}
			require.Equal(t, map[string]int{"b1": 0, "x": 0, "a4": 0}, behind(t, q.db))

			ds, err := q.Receive(ctx, 10)
			require.NoError(t, err)
			require.Equal(t, []string{"b1", "x", "a4"}, bodiesOf(ds))
		})
	}
}

// On PostgreSQL publishers and receivers run side by side: publishes of
// overlapping groups in different orders, receives, acks of several
// groups at once, and acks inside a transaction with a publish in the
// same group. Every message is received once, each group's in the order
// its messages were published, no group is left with a message that
// nothing is ahead of and that no receive hands out, and no statement
// fails (two of them waiting for each other in a circle would be
// broken by the server with an error).
func TestPostgresGroupHeadsUnderConcurrentPublishesAndAcks(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	const groups, publishers, rounds, receivers = 6, 4, 40, 3
	open := func() *Queue {
		q, err := Open(ctx, url, Config{Name: "race", Wait: 5 * time.Millisecond, PollInterval: time.Millisecond, Lease: time.Minute})
		require.NoError(t, err)
		t.Cleanup(func() { q.Close() })
		return q
	}
	var pubs, recvs []*Queue
	for range publishers {
		pubs = append(pubs, open())
	}
	for range receivers {
		recvs = append(recvs, open())
	}
	total := publishers * rounds * 3
	var mu sync.Mutex
	got := map[string][]int{} // group → the publish numbers received, in order
	received := 0
	errs := make(chan error, publishers+receivers)
	var wg sync.WaitGroup
	var pubWG sync.WaitGroup
	for p, q := range pubs {
		pubWG.Go(func() {
			r := rand.New(rand.NewPCG(uint64(p), 7))
			for i := range rounds {
				// Three messages in three groups, in a random order: a
				// statement that locks its groups in its rows' order would
				// meet another's in a circle.
				var bodies [][]byte
				var gs []string
				for _, g := range r.Perm(groups)[:3] {
					bodies = append(bodies, fmt.Appendf(nil, "%d", (p*rounds+i)*10+g))
					gs = append(gs, fmt.Sprint("g", g))
				}
				if err := q.PublishGrouped(ctx, bodies, gs); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	// A group left stuck would keep the receivers looking for good: once
	// the publishers are through, they stop after 300 looks in a row that
	// found nothing, and the count below says what was never received.
	published := make(chan struct{})
	var empty atomic.Int64
	for _, q := range recvs {
		wg.Go(func() {
			for {
				mu.Lock()
				done := received >= total
				mu.Unlock()
				select {
				case <-published:
					done = done || empty.Load() >= 300
				default:
				}
				if done {
					return
				}
				ds, err := q.Receive(ctx, 8)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, d := range ds {
					var n int
					fmt.Sscan(string(d.Body()), &n)
					g := fmt.Sprint("g", n%10)
					got[g] = append(got[g], n)
					received++
				}
				mu.Unlock()
				if len(ds) == 0 {
					empty.Add(1)
					continue
				}
				empty.Store(0)
				// Acks of several groups at once, in one transaction with a
				// publish into one of them now and then.
				tx, err := q.db.BeginTx(ctx, nil)
				if err == nil {
					err = q.PublishGroupedIn(ctx, tx, nil, nil)
				}
				if err == nil {
					_, err = q.ackWith(ctx, tx, true, ds)
				}
				if err == nil {
					err = tx.Commit()
				} else if tx != nil {
					_ = tx.Rollback()
				}
				if err != nil {
					errs <- err
					return
				}
				q.AckCommitted(ds)
			}
		})
	}
	pubWG.Wait()
	close(published)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, total, received)
	for g, ns := range got {
		// Each publisher's messages of a group are in its order; the
		// publishers' among each other are in the order they committed,
		// which each receiver saw the same.
		last := map[int]int{}
		for _, n := range ns {
			p := n / 10 / rounds
			if prev, ok := last[p]; ok {
				require.Greater(t, n, prev, "group %s: %v", g, ns)
			}
			last[p] = n
		}
	}
	var left int
	require.NoError(t, recvs[0].db.QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_queue`).Scan(&left))
	require.Zero(t, left)
}

// On PostgreSQL a grouped row's seq is drawn under its group's lock, so a
// group's order is the order its writers took the lock: a publish that
// waited for the lock first, and a row inserted by another writer (an
// older seqbox, a tool) that drew its default seq before it waited, come
// out with the head the lowest seq and every other row marked. The
// group's lock is held meanwhile, as the ack of its head holds it.
func TestPostgresGroupOrderIsTheLocksOrder(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, pgtest.URL(t), Config{Name: "order", Wait: time.Millisecond})
	require.NoError(t, err)
	defer q.Close()
	holder, err := q.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = holder.ExecContext(ctx, `SELECT `+pgdb.QueueGroupLock("'order'", "'g'"))
	require.NoError(t, err)
	waiting := func(n int) func() bool {
		return func() bool {
			var got int
			require.NoError(t, q.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&got))
			return got >= n
		}
	}
	done := make(chan error, 2)
	go func() { done <- q.PublishGrouped(ctx, [][]byte{[]byte("p")}, []string{"g"}) }()
	waitfor.That(t, 10*time.Second, "the publish waits for the group's lock", waiting(1))
	go func() {
		_, err := q.db.ExecContext(ctx, `INSERT INTO seqbox_queue (queue, body, visible_at, enqueued_at, msg_group) VALUES ('order', $1, 0, 0, 'g')`, []byte("r"))
		done <- err
	}()
	waitfor.That(t, 10*time.Second, "the other writer's row waits too", waiting(2))
	require.NoError(t, holder.Commit())
	require.NoError(t, <-done)
	require.NoError(t, <-done)

	rows, err := q.db.QueryContext(ctx, `SELECT body, behind FROM seqbox_queue WHERE queue = 'order' ORDER BY seq`)
	require.NoError(t, err)
	var order []string
	var marks []int
	for rows.Next() {
		var body []byte
		var b int
		require.NoError(t, rows.Scan(&body, &b))
		order, marks = append(order, string(body)), append(marks, b)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.Len(t, order, 2)
	require.Equal(t, []int{0, 1}, marks, "the lowest seq is the head, in the order %v", order)
	ds, err := q.Receive(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, order[:1], bodiesOf(ds))
}

// On PostgreSQL the triggers refuse to run in a transaction stricter
// than READ COMMITTED, whose snapshot would miss what the group's lock
// waited for; seqbox's own connections run at READ COMMITTED whatever
// the server's default.
func TestPostgresGroupsNeedReadCommitted(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, pgtest.URL(t), Config{Name: "iso", Wait: time.Millisecond})
	require.NoError(t, err)
	defer q.Close()
	var level string
	require.NoError(t, q.db.QueryRowContext(ctx, `SHOW default_transaction_isolation`).Scan(&level))
	require.Equal(t, "read committed", level)
	for _, iso := range []sql.IsolationLevel{sql.LevelRepeatableRead, sql.LevelSerializable} {
		tx, err := q.db.BeginTx(ctx, &sql.TxOptions{Isolation: iso})
		require.NoError(t, err)
		err = q.PublishGroupedIn(ctx, tx, [][]byte{[]byte("a")}, []string{"g"})
		require.ErrorContains(t, err, "need READ COMMITTED", iso.String())
		require.NoError(t, tx.Rollback())
	}
	require.NoError(t, q.PublishGrouped(ctx, [][]byte{[]byte("a")}, []string{"g"}))
	tx, err := q.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, `DELETE FROM seqbox_queue WHERE queue = 'iso'`)
	require.ErrorContains(t, err, "need READ COMMITTED")
	require.NoError(t, tx.Rollback())
}

// A queue made before the mark has it added on open, each waiting
// message marked from its group: the receive hands out the heads only,
// in order. (The queue is taken back to before the mark: its triggers
// and the column dropped, its order index as it was.)
func TestQueueBeforeHeadsIsMarkedOnOpen(t *testing.T) {
	for name, c := range map[string]struct {
		url  func(t *testing.T) string
		undo []string
	}{
		"sqlite": {func(t *testing.T) string { return filepath.Join(t.TempDir(), "q.db") }, []string{
			`DROP TRIGGER seqbox_queue_behind_insert`, `DROP TRIGGER seqbox_queue_behind_delete`, `DROP INDEX seqbox_queue_order`,
			`ALTER TABLE seqbox_queue DROP COLUMN behind`, `CREATE INDEX seqbox_queue_order ON seqbox_queue (queue, seq, visible_at)`}},
		"postgres": {func(t *testing.T) string { return pgtest.URL(t) }, []string{
			`DROP TRIGGER seqbox_queue_behind_insert ON seqbox_queue`, `DROP TRIGGER seqbox_queue_behind_delete ON seqbox_queue`,
			`DROP FUNCTION seqbox_queue_behind_insert()`, `DROP FUNCTION seqbox_queue_behind_delete()`,
			`ALTER TABLE seqbox_queue DROP COLUMN behind`, `CREATE INDEX IF NOT EXISTS seqbox_queue_order ON seqbox_queue (queue, seq)`}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			url := c.url(t)
			q, err := Open(ctx, url, Config{Name: "old", Wait: time.Millisecond})
			require.NoError(t, err)
			require.NoError(t, q.PublishGrouped(ctx, [][]byte{[]byte("a1"), []byte("a2"), []byte("b1"), []byte("x"), []byte("a3"), []byte("b2")},
				[]string{"a", "a", "b", "", "a", "b"}))
			conn, err := q.db.Conn(ctx)
			require.NoError(t, err)
			for _, stmt := range c.undo {
				_, err := conn.ExecContext(ctx, stmt)
				require.NoError(t, err, stmt)
			}
			require.NoError(t, conn.Close())
			require.NoError(t, q.Close())

			for range 2 { // and a second open changes nothing
				q, err := Open(ctx, url, Config{Name: "old", Wait: time.Millisecond})
				require.NoError(t, err)
				require.Equal(t, map[string]int{"a1": 0, "a2": 1, "b1": 0, "x": 0, "a3": 1, "b2": 1}, behind(t, q.db))
				require.NoError(t, q.Close())
			}
			q, err = Open(ctx, url, Config{Name: "old", Wait: time.Millisecond})
			require.NoError(t, err)
			defer q.Close()
			ds, err := q.Receive(ctx, 10)
			require.NoError(t, err)
			require.Equal(t, []string{"a1", "b1", "x"}, bodiesOf(ds))
			require.NoError(t, q.AckBatch(ctx, ds))
			ds, err = q.Receive(ctx, 10)
			require.NoError(t, err)
			require.Equal(t, []string{"a2", "b2"}, bodiesOf(ds))
		})
	}
}

// bodiesOf is each delivery's body, in order.
func bodiesOf(ds []transport.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Body())
	}
	return out
}

// The queue's triggers are the ones seqbox's check of a database knows
// as its own (sqlitedb.QueueTriggers): any other trigger is foreign.
func TestSQLiteQueueTriggersAreTheOnesSeqboxKnows(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"), Config{Name: "t"})
	require.NoError(t, err)
	defer q.Close()
	rows, err := q.db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'seqbox_queue'`)
	require.NoError(t, err)
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		names = append(names, name)
	}
	require.NoError(t, rows.Err())
	require.ElementsMatch(t, sqlitedb.QueueTriggers, names)
}

// behind maps each message's body to its behind column.
func behind(t *testing.T, db *sql.DB) map[string]int {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT body, behind FROM seqbox_queue`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var body []byte
		var b int
		require.NoError(t, rows.Scan(&body, &b))
		out[string(body)] = b
	}
	require.NoError(t, rows.Err())
	return out
}
