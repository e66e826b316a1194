package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
)

// The agent path's single statements made on PostgreSQL's pool at the
// same time (each event's look, its ledger's pending row, the record of
// its call with its decision) go to the server together (pipeGroup): a
// round trip and a commit for many, where each was a round trip and a
// commit of its own. Counted at the wire: 65 statements take at most 24
// round trips (four sends begun before the hold, then the rest, with
// their statements' first preparation on a connection), where alone they
// take at least 65.
func TestPoolStatementsGoTogetherOnPostgres(t *testing.T) {
	trips, url := pgtest.Proxy(t, pgtest.URL(t))
	st := openPostgres(t, url)
	before, got := trips.Count(), int64(0)
	writeAtOnceAndCheck(t, st, atOnce{meanwhile: heldUntilQueued(t, st), written: func() { got = trips.Count() - before }})
	require.Less(t, got, int64(24), "round trips for 65 statements made at once")
	require.Positive(t, sqlstore.PoolSends(st), "sends")
}

// Each caller still gets its own answer, as on SQLite's group commit: a
// record that fails (a NOT NULL) makes its send refused, and every
// statement of that send then runs alone, each told its own result.
func TestPoolStatementsOfARefusedSendGoAlone(t *testing.T) {
	st := openPostgres(t, pgtest.URL(t))
	writeAtOnceAndCheck(t, st, atOnce{bad: true, meanwhile: heldUntilQueued(t, st)})
	require.Positive(t, sqlstore.PoolSends(st), "sends")
}

// openPostgres opens a PostgreSQL store at url, closed when t ends.
func openPostgres(t *testing.T, url string) store.Store {
	st, err := postgres.Open(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// heldUntilQueued holds st's pool sends until n statements wait, then
// lets them go.
func heldUntilQueued(t *testing.T, st store.Store) func(n int) {
	waiting, release := sqlstore.HoldPoolSends(st)
	return func(n int) {
		waitfor.That(t, time.Minute, "the statements queued", func() bool { return waiting() == n || waiting() < 0 })
		release()
	}
}

// A send does not hold its statements hostage to one that waits for a
// row lock: the pending row of a key another transaction is inserting
// waits for that transaction, as it would alone, and the other
// statements of its send are answered and committed meanwhile (the send
// times out on the lock, is refused, and its statements go alone). Once
// the other transaction commits, the waiting insert is told the row
// exists.
func TestPoolSendIsNotHeldByOneStatementsLockWait(t *testing.T) {
	ctx := context.Background()
	st := openPostgres(t, pgtest.URL(t))
	other, err := st.Begin(ctx)
	require.NoError(t, err)
	defer other.Rollback()
	ok, err := other.EffectInsertPending(ctx, pendingRow("locked", "locked"))
	require.NoError(t, err)
	require.True(t, ok)

	lockedDone := make(chan bool, 1)
	inOneSend(t, st, func() {
		ok, err := st.Executor().EffectInsertPending(ctx, pendingRow("again", "locked"))
		assert.NoError(t, err)
		lockedDone <- ok
	})
	select {
	case <-lockedDone:
		t.Fatal("the insert of a key another transaction holds returned before that transaction ended")
	default:
	}
	require.NoError(t, other.Commit())
	require.False(t, <-lockedDone, "the row exists: the waiting insert inserted nothing")
}

// A statement whose Read fails (here: a row was expected, none came) is
// its caller's failure alone: the other statements of its send are
// answered and committed as if it had succeeded.
func TestPoolStatementsReadFailureIsItsCallersAlone(t *testing.T) {
	st := openPostgres(t, pgtest.URL(t))
	readErr := make(chan error, 1)
	inOneSend(t, st, func() {
		_, err := sqlstore.PoolStatement(context.Background(), st, store.Statement{Query: `SELECT 1 WHERE false`,
			Read: func(rows store.Rows) error {
				if !rows.Next() {
					return sql.ErrNoRows
				}
				return nil
			}})
		readErr <- err
	})
	require.ErrorIs(t, <-readErr, sql.ErrNoRows)
}

// pendingRow is the pending row of id under key.
func pendingRow(id, key string) store.EffectInsertPendingParams {
	at := time.Unix(1_800_000_000, 0)
	return store.EffectInsertPendingParams{Consumer: "c", Source: "s", ID: id, Action: "a", IdempotencyKey: key,
		At: at, LeaseUntil: at.Add(time.Minute)}
}

// inOneSend runs odd (in a goroutine of its own) between sixteen pending
// rows on st's pool, so that its statement goes in one send with eight of
// them: it is queued once the first eight hold every send under way (st's
// sends are held until all seventeen wait). It returns once the sixteen
// are answered, without waiting for odd, and requires each of them
// inserted and committed.
func inOneSend(t *testing.T, st store.Store, odd func()) {
	t.Helper()
	waiting, release := sqlstore.HoldPoolSends(st)
	op := st.Executor()
	const n = 8
	var wg sync.WaitGroup
	inserts := func(from int) {
		for i := from; i < from+n; i++ {
			wg.Go(func() {
				ok, err := op.EffectInsertPending(context.Background(), pendingRow(fmt.Sprint(i), fmt.Sprintf("free%d", i)))
				assert.NoError(t, err)
				assert.True(t, ok)
			})
		}
		waitfor.That(t, time.Minute, "the statements queued", func() bool { return waiting() >= from+n })
	}
	inserts(0)
	go odd()
	waitfor.That(t, time.Minute, "the odd statement queued", func() bool { return waiting() == n+1 })
	inserts(n + 1)
	release()
	wg.Wait()
	for i := range 2*n + 1 {
		if i == n {
			continue
		}
		_, err := op.EffectGet(context.Background(), fmt.Sprintf("free%d", i))
		require.NoError(t, err, "committed when its insert returned")
	}
}

// A statement whose caller gives up while its send waits for a pool
// connection is given up on, as a lone statement's wait for a connection
// is: it returns its context's error and writes nothing. (Before, a send
// waited for a connection whatever its callers' contexts did: with the
// database unreachable, a shutdown waited as long as the dial did.)
func TestPoolStatementGivenUpWhileItsSendWaitsForAConnection(t *testing.T) {
	st := openPostgres(t, pgtest.URL(t))
	db := st.DB()
	db.SetMaxOpenConns(1)
	held, err := db.Conn(context.Background())
	require.NoError(t, err)
	defer held.Close()
	waits := db.Stats().WaitCount
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := st.Executor().EffectInsertPending(ctx, pendingRow("gone", "gone"))
		done <- err
	}()
	waitfor.That(t, time.Minute, "the send waiting for the pool's one connection", func() bool { return db.Stats().WaitCount > waits })
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, held.Close())
	_, err = st.Executor().EffectGet(context.Background(), "gone")
	require.ErrorIs(t, err, store.ErrNotFound, "nothing written")
}
