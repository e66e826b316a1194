package drivertest

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// lockTests run two batch transactions at once on rows they commit
// under a consumer of their own: the second waits for the first, which
// ends by itself, so the test never waits on itself (on SQLite the second
// waits at Begin, for the one writer; on PostgreSQL for the row locks).
var lockTests = []driverTest{
	{"KeyLocksAndReadsFlagsUnderTheLock", func(t *testing.T, st store.Store) { testLocks(t, st, lockByKey) }},
	{"LockKeysLocksAndReadsFlagsUnderTheLock", func(t *testing.T, st store.Store) { testLocks(t, st, lockByLockKeys) }},
	{"AdvanceKeyRace", testAdvanceKeyRace},
	{"AdvanceKeysRace", testAdvanceKeysRace},
}

// stuckFor is how long the second transaction must stay waiting for the
// first one's locks. A store that does not lock may get past in this time
// and fail the test; one that locks never does.
const stuckFor = 300 * time.Millisecond

// lockFunc reads and locks a key's state in tx.
type lockFunc func(ctx context.Context, tx store.ExecutorTx, consumer, key string) (store.KeyState, error)

func lockByKey(ctx context.Context, tx store.ExecutorTx, consumer, key string) (store.KeyState, error) {
	return tx.KeyLock(ctx, store.KeyRef{Consumer: consumer, Key: key})
}

func lockByLockKeys(ctx context.Context, tx store.ExecutorTx, consumer, key string) (store.KeyState, error) {
	ks, err := tx.KeyLockMany(ctx, store.KeyLockManyParams{Consumer: consumer, Keys: []string{"zz-missing", key, "a-missing"}})
	if err == nil && len(ks) != 1 {
		err = errors.New("LockKeys returned keys that do not exist")
	}
	return ks[key], err
}

// begin opens a batch transaction that is rolled back when the test ends
// unless it was committed.
func (o *opEnv) begin() store.ExecutorTx {
	o.t.Helper()
	tx, err := o.st.Begin(o.ctx)
	require.NoError(o.t, err)
	o.t.Cleanup(func() {
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			o.t.Errorf("rollback: %v", err)
		}
	})
	return tx
}

// result is what a second transaction ended with.
type result[T any] struct {
	v   T
	err error
}

// inSecond runs fn in a second transaction, in a goroutine, while first
// is open; the second transaction commits when fn succeeds. It checks
// that the second transaction is still waiting after stuckFor, and
// returns a function that waits for it to end after first has. If the
// test fails before, first is rolled back and the goroutine waited for.
func inSecond[T any](o *opEnv, first store.ExecutorTx, fn func(tx store.ExecutorTx) (T, error)) func() T {
	o.t.Helper()
	res := make(chan result[T], 1)
	go func() {
		tx, err := o.st.Begin(o.ctx)
		if err != nil {
			res <- result[T]{err: err}
			return
		}
		v, err := fn(tx)
		if err == nil {
			err = tx.Commit()
		} else {
			_ = tx.Rollback()
		}
		res <- result[T]{v, err}
	}()
	var got *result[T]
	wait := func() result[T] {
		if got == nil {
			r := <-res
			got = &r
		}
		return *got
	}
	o.t.Cleanup(func() {
		_ = first.Rollback() // the second one may wait for it
		wait()
	})
	select {
	case r := <-res:
		got = &r
		o.t.Fatalf("the second transaction went past the first one's locks: %v, %v", r.v, r.err)
	case <-time.After(stuckFor):
	}
	return func() T {
		o.t.Helper()
		r := wait()
		require.NoError(o.t, r.err, "second transaction")
		return r.v
	}
}

// Key and LockKeys lock the key until the end of the transaction: a
// second transaction locking it waits, and then reads the first one's
// committed version, and what it parked and retried on the key meanwhile
// (on PostgreSQL, the flags must be read after the lock is granted, not
// from the snapshot the waiting statement started with).
func testLocks(t *testing.T, st store.Store, lock lockFunc) {
	o := newOp(t, st)
	o.commit(func(e *txEnv) { e.ensureKeys(at(0), "k") })
	tx1 := o.begin()
	ks, err := lock(o.ctx, tx1, o.consumer, "k")
	require.NoError(t, err)
	require.Equal(t, store.KeyState{Consumer: o.consumer, Key: "k", UpdatedAt: at(0)}, ks)

	second := inSecond(o, tx1, func(tx store.ExecutorTx) (store.KeyState, error) {
		return lock(o.ctx, tx, o.consumer, "k")
	})
	e := &txEnv{t: t, ctx: o.ctx, st: st, tx: tx1, consumer: o.consumer}
	e.park(e.parked("k", "crm", "2", ptr(int64(2)), seqboxtype.ParkHeld, 1))
	e.retry("k", "crm", "1", "boom", 1)
	won, err := tx1.KeyAdvance(o.ctx, store.KeyAdvanceParams{Consumer: o.consumer, Key: "k", Prev: nil, Next: 1, At: at(2)})
	require.NoError(t, err)
	require.True(t, won)
	require.NoError(t, tx1.Commit())

	got := second()
	require.Equal(t, store.KeyState{Consumer: o.consumer, Key: "k", Version: ptr(int64(1)), Baseline: ptr(int64(1)), UpdatedAt: at(2),
		HasParked: true, HasRetries: true}, got, "what the first transaction committed while the second waited")
}

// Two transactions moving a key from the same version: the second waits
// for the first and then loses.
func testAdvanceKeyRace(t *testing.T, st store.Store) {
	o := newOp(t, st)
	o.commit(func(e *txEnv) { e.ensureKeys(at(0), "k") })
	tx1 := o.begin()
	won, err := tx1.KeyAdvance(o.ctx, store.KeyAdvanceParams{Consumer: o.consumer, Key: "k", Prev: nil, Next: 1, At: at(1)})
	require.NoError(t, err)
	require.True(t, won)
	second := inSecond(o, tx1, func(tx store.ExecutorTx) (bool, error) {
		return tx.KeyAdvance(o.ctx, store.KeyAdvanceParams{Consumer: o.consumer, Key: "k", Prev: nil, Next: 7, At: at(2)})
	})
	require.NoError(t, tx1.Commit())
	require.False(t, second(), "the second compare-and-set from no version loses")
	v, err := o.op.KeyVersion(o.ctx, store.KeyRef{Consumer: o.consumer, Key: "k"})
	require.NoError(t, err)
	require.Equal(t, ptr(int64(1)), v)
}

// KeyAdvanceMany racing a transaction that moved some of its keys first
// wins exactly on the others.
func testAdvanceKeysRace(t *testing.T, st store.Store) {
	o := newOp(t, st)
	o.commit(func(e *txEnv) {
		e.ensureKeys(at(0), "k1", "k2", "k3")
		_, err := e.tx.KeyAdvance(e.ctx, store.KeyAdvanceParams{Consumer: o.consumer, Key: "k3", Prev: nil, Next: 5, At: at(0)})
		require.NoError(t, err)
	})
	tx1 := o.begin()
	won, err := tx1.KeyAdvanceMany(o.ctx, store.KeyAdvanceManyParams{Consumer: o.consumer, Moves: []store.KeyMove{{Key: "k1", Next: 1}, {Key: "k2", Next: 1}}, At: at(1)})
	require.NoError(t, err)
	require.Equal(t, 2, won)
	second := inSecond(o, tx1, func(tx store.ExecutorTx) (int, error) {
		return tx.KeyAdvanceMany(o.ctx, store.KeyAdvanceManyParams{Consumer: o.consumer, Moves: []store.KeyMove{
			{Key: "k3", Prev: ptr(int64(5)), Next: 6}, {Key: "k1", Next: 7}, {Key: "k2", Next: 7},
		}, At: at(2)})
	})
	require.NoError(t, tx1.Commit())
	require.Equal(t, 1, second(), "only k3's move wins")
	for key, want := range map[string]int64{"k1": 1, "k2": 1, "k3": 6} {
		v, err := o.op.KeyVersion(o.ctx, store.KeyRef{Consumer: o.consumer, Key: key})
		require.NoError(t, err)
		require.Equal(t, ptr(want), v, key)
	}
}
