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
	ctx := context.Background()
	trips, url := pgtest.Proxy(t, pgtest.URL(t))
	st, err := postgres.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	before, got := trips.Count(), int64(0)
	writeAtOnceAndCheck(t, st, atOnce{meanwhile: heldUntilQueued(t, st), written: func() { got = trips.Count() - before }})
	require.Less(t, got, int64(24), "round trips for 65 statements made at once")
	require.Positive(t, sqlstore.PoolSends(st), "sends of several statements")
}

// Each caller still gets its own answer, as on SQLite's group commit: a
// record that fails (a NOT NULL) makes its send refused, and every
// statement of that send then runs alone, each told its own result.
func TestPoolStatementsOfARefusedSendGoAlone(t *testing.T) {
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	writeAtOnceAndCheck(t, st, atOnce{bad: true, meanwhile: heldUntilQueued(t, st)})
	require.Positive(t, sqlstore.PoolSends(st), "sends of several statements")
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
// exists. The locked key's insert is queued after the first eight
// statements hold every send under way, so that it goes in one send with
// the next eight.
func TestPoolSendIsNotHeldByOneStatementsLockWait(t *testing.T) {
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	at := time.Unix(1_800_000_000, 0)
	pending := func(id, key string) store.EffectInsertPendingParams {
		return store.EffectInsertPendingParams{Consumer: "c", Source: "s", ID: id, Action: "a", IdempotencyKey: key,
			At: at, LeaseUntil: at.Add(time.Minute)}
	}
	other, err := st.Begin(ctx)
	require.NoError(t, err)
	defer other.Rollback()
	ok, err := other.EffectInsertPending(ctx, pending("locked", "locked"))
	require.NoError(t, err)
	require.True(t, ok)

	waiting, release := sqlstore.HoldPoolSends(st)
	op := st.Executor()
	const n = 8
	var wg sync.WaitGroup
	free := func(from int) {
		for i := from; i < from+n; i++ {
			wg.Go(func() {
				ok, err := op.EffectInsertPending(ctx, pending(fmt.Sprint(i), fmt.Sprintf("free%d", i)))
				assert.NoError(t, err)
				assert.True(t, ok)
			})
		}
		waitfor.That(t, time.Minute, "the statements queued", func() bool { return waiting() >= from+n })
	}
	free(0)
	lockedDone := make(chan bool, 1)
	go func() {
		ok, err := op.EffectInsertPending(ctx, pending("again", "locked"))
		assert.NoError(t, err)
		lockedDone <- ok
	}()
	waitfor.That(t, time.Minute, "the locked key's insert queued", func() bool { return waiting() == n+1 })
	free(n + 1)
	release()
	wg.Wait() // while the other transaction is still open
	for i := range 2*n + 1 {
		if i == n {
			continue
		}
		_, err := op.EffectGet(ctx, fmt.Sprintf("free%d", i))
		require.NoError(t, err, "committed while the locked key's insert waits")
	}
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
// answered and committed as if it had succeeded. (It is queued once the
// first eight statements hold every send under way, so that it goes in
// one send with the next eight.)
func TestPoolStatementsReadFailureIsItsCallersAlone(t *testing.T) {
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	waiting, release := sqlstore.HoldPoolSends(st)
	at := time.Unix(1_800_000_000, 0)
	op := st.Executor()
	const n = 8
	var wg sync.WaitGroup
	inserts := func(from int) {
		for i := from; i < from+n; i++ {
			wg.Go(func() {
				ok, err := op.EffectInsertPending(ctx, store.EffectInsertPendingParams{Consumer: "c", Source: "s",
					ID: fmt.Sprint(i), Action: "a", IdempotencyKey: fmt.Sprintf("k%d", i), At: at, LeaseUntil: at.Add(time.Minute)})
				assert.NoError(t, err)
				assert.True(t, ok)
			})
		}
		waitfor.That(t, time.Minute, "the statements queued", func() bool { return waiting() >= from+n })
	}
	inserts(0)
	var readErr error
	wg.Go(func() {
		_, readErr = sqlstore.PoolStatement(ctx, st, store.Statement{Query: `SELECT 1 WHERE false`,
			Read: func(rows store.Rows) error {
				if !rows.Next() {
					return sql.ErrNoRows
				}
				return nil
			}})
	})
	waitfor.That(t, time.Minute, "the failing read queued", func() bool { return waiting() == n+1 })
	inserts(n + 1)
	release()
	wg.Wait()
	require.ErrorIs(t, readErr, sql.ErrNoRows)
	for i := range 2*n + 1 {
		if i == n {
			continue
		}
		_, err := op.EffectGet(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err)
	}
}
