package embedded

import (
	"context"
	"database/sql"

	"path/filepath"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/sqlitedb"
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

// Which messages are behind an earlier one of their group is kept by the
// queue's schema, whoever writes the table: a publish, a row deleted by
// hand (as a tool or a chaos run does), several rows of a group deleted
// in one statement, and a row inserted by a binary that knows nothing of
// the column (an older seqbox on the same file during an upgrade).
func TestSQLiteGroupHeadsAreKeptByTheSchema(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"), Config{Name: "heads", Wait: time.Millisecond})
	require.NoError(t, err)
	defer q.Close()
	require.NoError(t, q.PublishGrouped(ctx, [][]byte{[]byte("a1"), []byte("a2"), []byte("b1"), []byte("a3"), []byte("x")},
		[]string{"a", "a", "b", "a", ""}))
	require.Equal(t, map[string]int{"a1": 0, "a2": 1, "b1": 0, "a3": 1, "x": 0}, behind(t, q.db))

	// A head deleted by hand: the next one of its group is the head.
	_, err = q.db.ExecContext(ctx, `DELETE FROM seqbox_queue WHERE body = CAST('a1' AS BLOB)`)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"a2": 0, "b1": 0, "a3": 1, "x": 0}, behind(t, q.db))

	// Rows inserted without the column, as a binary before it did.
	for _, row := range [][2]string{{"a4", "a"}, {"c1", "c"}, {"c2", "c"}} {
		_, err = q.db.ExecContext(ctx, `INSERT INTO seqbox_queue (queue, body, visible_at, enqueued_at, msg_group) VALUES ('heads', CAST(? AS BLOB), 0, 0, ?)`,
			row[0], row[1])
		require.NoError(t, err)
	}
	require.Equal(t, map[string]int{"a2": 0, "b1": 0, "a3": 1, "x": 0, "a4": 1, "c1": 0, "c2": 1}, behind(t, q.db))

	// A group's head and the one after it deleted in one statement, in
	// either order of the rows.
	_, err = q.db.ExecContext(ctx, `DELETE FROM seqbox_queue WHERE body IN (CAST('a2' AS BLOB), CAST('a3' AS BLOB), CAST('c2' AS BLOB))`)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"b1": 0, "x": 0, "a4": 0, "c1": 0}, behind(t, q.db))

	ds, err := q.Receive(ctx, 10)
	require.NoError(t, err)
	var got []string
	for _, d := range ds {
		got = append(got, string(d.Body()))
	}
	require.Equal(t, []string{"b1", "x", "a4", "c1"}, got)
}

// A queue made before the column has it added on open, each waiting
// message marked from its group: the receive hands out the heads only,
// in order.
func TestSQLiteQueueBeforeHeadsIsMarkedOnOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	db, err := sqlitedb.Open(ctx, path)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE TABLE seqbox_queue (seq INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL, body BLOB NOT NULL,
		visible_at BIGINT NOT NULL, lease TEXT NOT NULL DEFAULT '', attempts INTEGER NOT NULL DEFAULT 0, enqueued_at BIGINT NOT NULL,
		msg_group TEXT NOT NULL DEFAULT '')`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE INDEX seqbox_queue_order ON seqbox_queue (queue, seq, visible_at)`)
	require.NoError(t, err)
	for i, row := range [][2]string{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}, {"x", ""}, {"a3", "a"}, {"b2", "b"}} {
		_, err = db.ExecContext(ctx, `INSERT INTO seqbox_queue (queue, body, visible_at, enqueued_at, msg_group) VALUES ('old', CAST(? AS BLOB), ?, 0, ?)`,
			row[0], i, row[1])
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	for range 2 { // and a second open changes nothing
		q, err := Open(ctx, path, Config{Name: "old", Wait: time.Millisecond})
		require.NoError(t, err)
		require.Equal(t, map[string]int{"a1": 0, "a2": 1, "b1": 0, "x": 0, "a3": 1, "b2": 1}, behind(t, q.db))
		require.NoError(t, q.Close())
	}
	q, err := Open(ctx, path, Config{Name: "old", Wait: time.Millisecond})
	require.NoError(t, err)
	defer q.Close()
	ds, err := q.Receive(ctx, 10)
	require.NoError(t, err)
	require.Len(t, ds, 3)
	require.Equal(t, []string{"a1", "b1", "x"}, []string{string(ds[0].Body()), string(ds[1].Body()), string(ds[2].Body())})
	require.NoError(t, q.AckBatch(ctx, ds))
	ds, err = q.Receive(ctx, 10)
	require.NoError(t, err)
	require.Len(t, ds, 2)
	require.Equal(t, []string{"a2", "b2"}, []string{string(ds[0].Body()), string(ds[1].Body())})
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
	rows, err := db.QueryContext(context.Background(), `SELECT CAST(body AS TEXT), behind FROM seqbox_queue`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var body string
		var b int
		require.NoError(t, rows.Scan(&body, &b))
		out[body] = b
	}
	require.NoError(t, rows.Err())
	return out
}
