package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

// Writes made outside a transaction at the same time on SQLite commit
// together (groupCommit), and each still gets its own answer: a write
// that fails (here a NOT NULL) fails alone, a duplicate is told it
// inserted nothing, and every other one is committed when it returns.
func TestGroupedWritesAnswerEachCaller(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	defer st.Close()
	writeAtOnceAndCheck(t, st, atOnce{bad: true})
}

// atOnce shapes writeAtOnceAndCheck's writes.
type atOnce struct {
	// bad adds a decision record that fails (a NOT NULL).
	bad bool
	// meanwhile, when set, runs while the writes are under way, told how
	// many were begun.
	meanwhile func(n int)
	// written, when set, runs once every write returned, before the
	// checks read anything.
	written func()
}

// writeAtOnceAndCheck makes 65 pending-row inserts (the last repeats the
// first one's key), and those o adds, at once on st's pool, and checks
// each caller's answer and what was committed.
func writeAtOnceAndCheck(t *testing.T, st store.Store, o atOnce) {
	t.Helper()
	ctx := context.Background()
	op := st.Executor()
	at := time.Unix(1_800_000_000, 0)
	const n = 64
	var wg sync.WaitGroup
	inserted := make([]bool, n+1)
	errs := make([]error, n+2)
	for i := range n + 1 {
		wg.Go(func() {
			key := fmt.Sprintf("k%d", i%n) // the last one repeats k0
			inserted[i], errs[i] = op.EffectInsertPending(ctx, store.EffectInsertPendingParams{Consumer: "c", Source: "s",
				ID: fmt.Sprint(i), Action: "a", IdempotencyKey: key, At: at, LeaseUntil: at.Add(time.Minute)})
		})
	}
	begun := n + 1
	if o.bad {
		begun++
		wg.Go(func() {
			_, errs[n+1] = op.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: "c", Source: "s", ID: "bad", Decision: nil, At: at})
		})
	}
	if o.meanwhile != nil {
		o.meanwhile(begun)
	}
	wg.Wait()
	if o.written != nil {
		o.written()
	}
	if o.bad {
		require.Error(t, errs[n+1], "a write that fails fails alone")
	}
	wins := 0
	for i := range n + 1 {
		require.NoError(t, errs[i], "write %d", i)
		if inserted[i] {
			wins++
		}
	}
	require.Equal(t, n, wins, "k0 was inserted once, the other write of it was told it inserted nothing")
	for i := range n {
		row, err := op.EffectGet(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err, "committed when its write returned")
		require.Equal(t, "pending", string(row.State))
	}
	_, err := op.DecisionGet(ctx, store.MessageRef{Consumer: "c", Source: "s", ID: "bad"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A write whose context ended before its group ran writes nothing and
// says so; the store closes with its writer goroutine.
func TestGroupedWriteGivenUpWritesNothing(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	op := st.Executor()
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = op.EffectInsertPending(done, store.EffectInsertPendingParams{Consumer: "c", Source: "s", ID: "1", Action: "a",
		IdempotencyKey: "k", At: time.Unix(1, 0), LeaseUntil: time.Unix(2, 0)})
	require.ErrorIs(t, err, context.Canceled)
	_, err = op.EffectGet(ctx, "k")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, st.Close())
	_, err = op.EffectInsertPending(ctx, store.EffectInsertPendingParams{Consumer: "c", Source: "s", ID: "1", Action: "a",
		IdempotencyKey: "k", At: time.Unix(1, 0), LeaseUntil: time.Unix(2, 0)})
	require.Error(t, err, "a closed store writes nothing")
}

// A store transaction that begins while writes wait on the pool carries
// them: they commit with it, in its one fsync, and their callers return
// only then. One that rolls back gives them back to the queue, and the
// next transaction commits them. (The group's own writer is kept from
// starting, so only the transactions can carry them.)
func TestBatchTransactionsCarryTheQueuedWrites(t *testing.T) {
	ctx, st, op, at := withoutGroupWriter(t)
	done := make(chan error, 1)
	go func() {
		_, err := op.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: "c", Source: "s", ID: "1", Decision: []byte("yes"), PayloadHash: "h", At: at})
		done <- err
	}()
	waitfor.That(t, 10*time.Second, "the write queued", func() bool { return sqlstore.QueuedWrites(st) == 1 })

	tx, err := st.Begin(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, sqlstore.QueuedWrites(st), "the transaction took the write")
	require.NoError(t, tx.Rollback())
	require.Equal(t, 1, sqlstore.QueuedWrites(st), "rolled back: the write waits again")
	select {
	case err := <-done:
		t.Fatalf("the write returned (%v) before any transaction committed it", err)
	default:
	}
	_, err = op.DecisionGet(ctx, store.MessageRef{Consumer: "c", Source: "s", ID: "1"})
	require.ErrorIs(t, err, store.ErrNotFound, "nothing committed yet")

	tx, err = st.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: "c", Key: "k", At: at}))
	require.NoError(t, tx.Commit())
	require.NoError(t, <-done, "committed with the batch")
	d, err := op.DecisionGet(ctx, store.MessageRef{Consumer: "c", Source: "s", ID: "1"})
	require.NoError(t, err)
	require.Equal(t, []byte("yes"), d.Value)
}

// A store with one writer runs its write transactions on one connection
// of their own, which reads never borrow: a TEMP table (a connection's
// own) created in one write transaction is there in the next, however
// busy the pool was in between.
func TestWriteTransactionsShareOneConnection(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	defer st.Close()
	tx, err := st.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.SQL().ExecContext(ctx, `CREATE TEMP TABLE writer_mark (x INTEGER)`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	for round := range 3 {
		// Reads that hold connections of the pool while the next write
		// transaction begins.
		var open []*sql.Rows
		for range 8 {
			rows, err := st.DB().QueryContext(ctx, `SELECT 1`)
			require.NoError(t, err)
			open = append(open, rows)
		}
		tx, err := st.Begin(ctx)
		require.NoError(t, err)
		var n int
		require.NoError(t, tx.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM temp.sqlite_master WHERE name = 'writer_mark'`).Scan(&n))
		require.NoError(t, tx.Commit())
		for _, rows := range open {
			require.NoError(t, rows.Close())
		}
		require.Equal(t, 1, n, "round %d: the write transaction ran on another connection", round)
	}
}

// A write queued while a store transaction runs commits with that
// transaction, not with the next one to begin: the transaction takes it
// just before its COMMIT, so the one fsync is shared and the caller (a
// pending row that an agent's call waits for) waits for the transaction
// under way rather than for the next. A write that fails there fails
// alone and the transaction's own work commits; a transaction that rolls
// back carries nothing. (The group's own writer is kept from starting,
// so only the transactions can carry the writes.)
func TestWritesQueuedDuringATransactionRideItsCommit(t *testing.T) {
	ctx, st, op, at := withoutGroupWriter(t)
	var err error
	record := func(id string, decision []byte) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := op.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: "c", Source: "s", ID: id, Decision: decision, PayloadHash: "h", At: at})
			done <- err
		}()
		return done
	}

	// Rolled back: the write queued meanwhile stays queued.
	tx, err := st.Begin(ctx)
	require.NoError(t, err)
	first := record("1", []byte("yes"))
	waitfor.That(t, 10*time.Second, "the write queued", func() bool { return sqlstore.QueuedWrites(st) == 1 })
	require.NoError(t, tx.Rollback())
	require.Equal(t, 1, sqlstore.QueuedWrites(st), "a rollback carries nothing")

	// Committed: the write queued before it began and those queued while
	// it ran commit with it, the failing one alone failing.
	tx, err = st.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: "c", Key: "k", At: at}))
	second, bad := record("2", []byte("also")), record("bad", nil)
	waitfor.That(t, 10*time.Second, "the writes queued", func() bool { return sqlstore.QueuedWrites(st) == 2 })
	require.NoError(t, tx.Commit())
	require.Equal(t, 0, sqlstore.QueuedWrites(st), "every queued write rode the commit")
	require.NoError(t, <-first, "queued before the transaction began: carried from its start")
	require.NoError(t, <-second, "queued while it ran: carried at its commit")
	require.Error(t, <-bad, "a carried write that fails fails alone")
	require.Equal(t, 0, sqlstore.QueuedWrites(st))
	for id, want := range map[string]string{"1": "yes", "2": "also"} {
		d, err := op.DecisionGet(ctx, store.MessageRef{Consumer: "c", Source: "s", ID: id})
		require.NoError(t, err, "decision %s committed when its write returned", id)
		require.Equal(t, want, string(d.Value))
	}
	_, err = op.DecisionGet(ctx, store.MessageRef{Consumer: "c", Source: "s", ID: "bad"})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = op.KeyViewGet(ctx, store.KeyRef{Consumer: "c", Key: "k"})
	require.NoError(t, err, "the transaction's own work committed")

	// A transaction that ended carries nothing when it is told to commit
	// again: the write waits for the next one.
	last := record("3", []byte("later"))
	waitfor.That(t, 10*time.Second, "the write queued", func() bool { return sqlstore.QueuedWrites(st) == 1 })
	require.Error(t, tx.Commit(), "committed already")
	require.Equal(t, 1, sqlstore.QueuedWrites(st), "still queued")
	tx, err = st.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	require.NoError(t, <-last)
}

// withoutGroupWriter opens a SQLite store whose grouped writes only
// transactions can carry (the group's own writer is kept from starting),
// with its pool executor and a time for the rows.
func withoutGroupWriter(t *testing.T) (context.Context, store.Store, store.Executor, time.Time) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	sqlstore.NoGroupWriter(st)
	return ctx, st, st.Executor(), time.Unix(1_800_000_000, 0)
}
