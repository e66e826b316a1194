package sqlitedb

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// shortBusyTimeout makes a writer pool's busy handler give up after a few
// milliseconds, so that a lock held past it is met at once.
func shortBusyTimeout(t *testing.T) {
	t.Helper()
	prev := busyTimeoutMS
	busyTimeoutMS = 20
	t.Cleanup(func() { busyTimeoutMS = prev })
}

// openStore opens a store on a fresh file through Open, as store/sqlite
// does, and a second pool on the same file standing for another process:
// it shares no writer turn with the store.
func openStore(t *testing.T) (st *sqlstore.Store, other *sql.DB) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "seqbox.db")
	db, err := Open(ctx, path)
	require.NoError(t, err)
	st, err = sqlstore.Open(ctx, db, Dialect, path)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	other, err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(20)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	_, err = other.Exec(`CREATE TABLE IF NOT EXISTS other_process (x INTEGER)`)
	require.NoError(t, err)
	return st, other
}

// contention reports, once, each time a step of seqbox's met its own
// database busy and goes on (waits for the writer turn or tries again).
func contention(t *testing.T) <-chan struct{} {
	t.Helper()
	ch := make(chan struct{}, 1000)
	prev := onContention
	onContention = func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { onContention = prev })
	return ch
}

// pendingEffect is the effects ledger's first write for call n: its
// pending row, outside any transaction.
func pendingEffect(ctx context.Context, ex store.Executor, n int) error {
	now := time.Now()
	id := "e" + strconv.Itoa(n)
	_, err := ex.EffectInsertPending(ctx, store.EffectInsertPendingParams{Consumer: "c", Source: "s", ID: id,
		Action: "call", IdempotencyKey: "sbx-" + id, At: now, LeaseUntil: now.Add(time.Minute)})
	return err
}

// Issue 36: a write of the effects ledger or the decider, outside any
// transaction, while another process holds the write lock past
// busy_timeout, waits it out inside the step instead of failing it with
// SQLITE_BUSY (which spent one of the event's attempts, or lost the record
// of a call that succeeded remotely).
func TestExecutorWriteWaitsOutAnotherProcessesLock(t *testing.T) {
	shortBusyTimeout(t)
	ctx := context.Background()
	met := contention(t)
	st, other := openStore(t)
	tx, err := other.Begin() // BEGIN IMMEDIATE: the write lock
	require.NoError(t, err)
	_, err = tx.Exec(`INSERT INTO other_process VALUES (1)`)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { done <- pendingEffect(ctx, st.Executor(), 1) }()
	select {
	case err := <-done:
		tx.Rollback()
		t.Fatalf("the ledger's write returned while another process held the lock, want it to wait: %v", err)
	case <-met:
	}
	require.NoError(t, tx.Commit())
	require.NoError(t, <-done, "the ledger's write, once the lock was free")
	row, err := st.Executor().EffectGet(ctx, "sbx-e1")
	require.NoError(t, err)
	require.Equal(t, seqboxtype.EffectPending, row.State)
}

// A batch transaction that begins while another process holds the write
// lock past busy_timeout waits it out in Begin: the pipeline never counts
// an attempt for seqbox's own contention.
func TestBeginWaitsOutAnotherProcessesLock(t *testing.T) {
	shortBusyTimeout(t)
	ctx := context.Background()
	met := contention(t)
	st, other := openStore(t)
	held, err := other.Begin()
	require.NoError(t, err)
	_, err = held.Exec(`INSERT INTO other_process VALUES (1)`)
	require.NoError(t, err)

	type begun struct {
		tx  store.ExecutorTx
		err error
	}
	done := make(chan begun, 1)
	go func() {
		tx, err := st.Begin(ctx)
		done <- begun{tx, err}
	}()
	select {
	case b := <-done:
		held.Rollback()
		if b.tx != nil {
			b.tx.Rollback()
		}
		t.Fatalf("Begin returned while another process held the lock, want it to wait: %v", b.err)
	case <-met:
	}
	require.NoError(t, held.Commit())
	b := <-done
	require.NoError(t, b.err, "Begin, once the lock was free")
	require.NoError(t, b.tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: "c", Key: "k", At: time.Now()}))
	require.NoError(t, b.tx.Commit())
}

// In one process, a write outside any transaction (the ledger's, the
// decider's) waits for the writer turn a batch transaction holds, and
// runs the moment it commits, instead of polling in SQLite's busy handler
// behind it: a stream of batches, each taking the turn as the last one
// commits, starved such polls past busy_timeout.
func TestExecutorWriteTakesTheWriterTurn(t *testing.T) {
	shortBusyTimeout(t)
	ctx := context.Background()
	met := contention(t)
	st, _ := openStore(t)
	batch, err := st.Begin(ctx) // the turn, and the write lock
	require.NoError(t, err)
	require.NoError(t, batch.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: "c", Key: "k", At: time.Now()}))

	done := make(chan error, 1)
	go func() { done <- pendingEffect(ctx, st.Executor(), 2) }()
	select {
	case err := <-done:
		batch.Rollback()
		t.Fatalf("the ledger's write returned while a batch held the writer turn, want it to wait for the turn: %v", err)
	case <-met:
	}
	retriedBefore := BusyRetries()
	require.NoError(t, batch.Commit())
	require.NoError(t, <-done, "the ledger's write, once the batch committed")
	require.Equal(t, retriedBefore, BusyRetries(), "the write waited for the turn, not in SQLite's busy handler")
}

// A write outside a transaction whose database stays busy past the
// patience fails with a ContendedError: still SQLITE_BUSY to errors.As,
// and, by its Wait, an error the pipeline answers with a wait instead of
// spending one of the message's attempts.
func TestBusyPastPatienceAsksForAWait(t *testing.T) {
	shortBusyTimeout(t)
	prev := busyPatience
	busyPatience = 0
	t.Cleanup(func() { busyPatience = prev })
	ctx := context.Background()
	st, other := openStore(t)
	tx, err := other.Begin()
	require.NoError(t, err)
	defer tx.Rollback()
	_, err = tx.Exec(`INSERT INTO other_process VALUES (1)`)
	require.NoError(t, err)

	err = pendingEffect(ctx, st.Executor(), 3)
	require.True(t, IsBusy(err), "%v", err)
	var w interface{ Wait() time.Duration }
	require.ErrorAs(t, err, &w)
	require.Positive(t, w.Wait())
	var ce *ContendedError
	require.ErrorAs(t, err, &ce)
}

// kindOf decides which statements take the writer turn outside a
// transaction: all but the ones that cannot write.
func TestKindOf(t *testing.T) {
	for q, want := range map[string]kind{
		"SELECT 1":                             kindRead,
		"  select * from t":                    kindRead,
		"-- note\nSELECT 1":                    kindRead,
		"/* x */ (SELECT 1)":                   kindRead,
		"PRAGMA wal_checkpoint(TRUNCATE)":      kindRead,
		"INSERT INTO t VALUES (1) RETURNING x": kindWrite,
		"UPDATE t SET x = 1":                   kindWrite,
		"DELETE FROM t":                        kindWrite,
		"WITH a AS (SELECT 1) DELETE FROM t":   kindWrite,
		"CREATE TABLE t (x)":                   kindWrite,
		"BEGIN IMMEDIATE":                      kindBegin,
		"COMMIT":                               kindEnd,
		"END TRANSACTION":                      kindEnd,
		"ROLLBACK":                             kindEnd,
		"ROLLBACK TO sp1":                      kindWrite,
		"ROLLBACK TRANSACTION TO SAVEPOINT a":  kindWrite,
		"-- unterminated":                      kindWrite,
	} {
		require.Equal(t, want, kindOf(q), "%q", q)
	}
}
