package drivertest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// Key finds only keys that exist; EnsureKey creates one with no version
// and is idempotent: it changes nothing of a key that exists.
func testKeyAndEnsureKey(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	_, err := tx.KeyLock(ctx, store.KeyRef{Consumer: e.consumer, Key: "order-1"})
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: e.consumer, Key: "order-1", At: at(1)}))
	want := store.KeyState{Consumer: e.consumer, Key: "order-1", UpdatedAt: at(1)}
	require.Equal(t, want, e.key("order-1"))
	require.NoError(t, tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: e.consumer, Key: "order-1", At: at(2)}))
	require.Equal(t, want, e.key("order-1"), "a second EnsureKey changes nothing")

	won, err := tx.KeyAdvance(ctx, store.KeyAdvanceParams{Consumer: e.consumer, Key: "order-1", Prev: nil, Next: 5, At: at(3)})
	require.NoError(t, err)
	require.True(t, won)
	require.NoError(t, tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: e.consumer, Key: "order-1", At: at(4)}))
	want.Version, want.Baseline, want.UpdatedAt = ptr(int64(5)), ptr(int64(5)), at(3)
	require.Equal(t, want, e.key("order-1"), "EnsureKey keeps the version")

	_, err = tx.KeyLock(ctx, store.KeyRef{Consumer: e.consumer + "/other", Key: "order-1"})
	require.ErrorIs(t, err, store.ErrNotFound, "keys belong to one consumer")
	_, err = tx.KeyLock(ctx, store.KeyRef{Consumer: e.consumer, Key: "order-2"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

// Key says whether anything is parked or retrying on the key, its own
// consumer's only.
func testKeyFlags(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	e.ensureKeys(at(0), "parked", "retrying", "both", "neither")
	e.park(e.parked("parked", "crm", "1", ptr(int64(2)), seqboxtype.ParkHeld, 1))
	e.park(e.parked("both", "crm", "2", nil, seqboxtype.ParkBlocked, 2))
	e.retry("retrying", "crm", "3", "boom", 3)
	e.retry("both", "crm", "4", "boom", 4)
	// Another consumer's rows on the quiet key do not count.
	other := e.parked("neither", "crm", "5", nil, seqboxtype.ParkHeld, 5)
	other.Consumer += "/other"
	e.park(other)
	_, err := tx.RetryRecord(ctx, store.RetryRow{Consumer: e.consumer + "/other", Source: "crm", ID: "6", PartitionKey: "neither", Error: "x", At: at(6)})
	require.NoError(t, err)

	for key, want := range map[string][2]bool{
		"parked": {true, false}, "retrying": {false, true}, "both": {true, true}, "neither": {false, false},
	} {
		k := e.key(key)
		require.Equal(t, want, [2]bool{k.HasParked, k.HasRetries}, "key %s: HasParked, HasRetries", key)
	}
}

// AdvanceKey is a compare-and-set: it wins only from the version the key
// has (nil: none yet), and a loss changes nothing.
func testAdvanceKey(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	advance := func(prev *int64, next int64, when int) bool {
		t.Helper()
		won, err := tx.KeyAdvance(ctx, store.KeyAdvanceParams{Consumer: e.consumer, Key: "order-1", Prev: prev, Next: next, At: at(when)})
		require.NoError(t, err)
		return won
	}
	require.False(t, advance(nil, 1, 1), "a key that does not exist")
	_, err := tx.KeyLock(ctx, store.KeyRef{Consumer: e.consumer, Key: "order-1"})
	require.ErrorIs(t, err, store.ErrNotFound, "a lost AdvanceKey creates nothing")

	e.ensureKeys(at(0), "order-1")
	e.ensureKeys(at(0), "order-2")
	require.False(t, advance(ptr(int64(0)), 1, 1), "0 is not the missing version")
	require.True(t, advance(nil, 1, 2), "from no version")
	want := store.KeyState{Consumer: e.consumer, Key: "order-1", Version: ptr(int64(1)), Baseline: ptr(int64(1)), UpdatedAt: at(2)}
	require.Equal(t, want, e.key("order-1"))

	require.False(t, advance(nil, 2, 3), "the key has a version now")
	require.False(t, advance(ptr(int64(2)), 3, 3), "a wrong previous version")
	require.False(t, advance(ptr(int64(0)), 3, 3), "a wrong previous version")
	require.Equal(t, want, e.key("order-1"), "lost compare-and-sets change nothing")

	require.True(t, advance(ptr(int64(1)), 4, 5))
	want.Version, want.UpdatedAt = ptr(int64(4)), at(5)
	require.Equal(t, want, e.key("order-1"))
	require.Nil(t, e.key("order-2").Version, "another key is untouched")

	other := e.consumer + "/other"
	require.NoError(t, tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: other, Key: "order-1", At: at(0)}))
	won, err := tx.KeyAdvance(ctx, store.KeyAdvanceParams{Consumer: other, Key: "order-1", Prev: ptr(int64(4)), Next: 9, At: at(9)})
	require.NoError(t, err)
	require.False(t, won, "another consumer's key has its own version")
	require.Equal(t, want, e.key("order-1"))
}

// KeyAdvanceMany runs every compare-and-set across chunk boundaries and
// counts exactly the winners; losers, missing keys and other consumers'
// keys are untouched.
func testAdvanceKeys(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	const n = 300
	key := func(i int) string { return fmt.Sprintf("order-%03d", i) }
	keys := make([]string, n)
	for i := range keys {
		keys[i] = key(i)
	}
	require.NoError(t, tx.KeyEnsureMany(ctx, store.KeyEnsureManyParams{Consumer: e.consumer, Keys: keys, At: at(0)}))
	require.NoError(t, tx.KeyEnsureMany(ctx, store.KeyEnsureManyParams{Consumer: e.consumer + "/other", Keys: keys, At: at(0)}))
	// Keys with i%3 == 0 have version i; the others none.
	var setup []store.KeyMove
	for i := 0; i < n; i += 3 {
		setup = append(setup, store.KeyMove{Key: key(i), Next: int64(i)})
	}
	won, err := tx.KeyAdvanceMany(ctx, store.KeyAdvanceManyParams{Consumer: e.consumer, Moves: setup, At: at(1)})
	require.NoError(t, err)
	require.Equal(t, len(setup), won)

	var moves []store.KeyMove
	want := map[string]store.KeyState{}
	winners := 0
	for i := range n {
		ks := store.KeyState{Consumer: e.consumer, Key: key(i), UpdatedAt: at(0)}
		if i%3 == 0 {
			ks.Version, ks.Baseline, ks.UpdatedAt = ptr(int64(i)), ptr(int64(i)), at(1)
		}
		m := store.KeyMove{Key: key(i), Next: int64(1000 + i)}
		right := i%2 == 0
		switch {
		case i%3 == 0 && right:
			m.Prev = ptr(int64(i))
		case i%3 == 0:
			m.Prev = ptr(int64(i + 1))
		case right:
			m.Prev = nil
		default:
			m.Prev = ptr(int64(i % 3))
		}
		moves = append(moves, m)
		if right {
			winners++
			ks.Version, ks.UpdatedAt = ptr(m.Next), at(2)
			if ks.Baseline == nil {
				ks.Baseline = ptr(m.Next) // its first version; a later move keeps the first
			}
		}
		want[key(i)] = ks
	}
	for i := range 20 {
		moves = append(moves, store.KeyMove{Key: fmt.Sprintf("missing-%d", i), Next: 1})
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(moves), func(i, j int) { moves[i], moves[j] = moves[j], moves[i] })

	won, err = tx.KeyAdvanceMany(ctx, store.KeyAdvanceManyParams{Consumer: e.consumer, Moves: moves, At: at(2)})
	require.NoError(t, err)
	require.Equal(t, winners, won, "the winners, exactly")
	for i := range n {
		require.Equal(t, want[key(i)], e.key(key(i)))
	}
	require.Equal(t, n, e.count("seqbox_keys", ""), "a move on a missing key creates nothing")
	other, err := tx.KeyLockMany(ctx, store.KeyLockManyParams{Consumer: e.consumer + "/other", Keys: keys})
	require.NoError(t, err)
	for _, k := range other {
		require.Nil(t, k.Version, "another consumer's key %s is untouched", k.Key)
	}

	won, err = tx.KeyAdvanceMany(ctx, store.KeyAdvanceManyParams{Consumer: e.consumer, Moves: moves, At: at(3)})
	require.NoError(t, err)
	require.Zero(t, won, "the same moves again: every key has moved on")
	won, err = tx.KeyAdvanceMany(ctx, store.KeyAdvanceManyParams{Consumer: e.consumer, Moves: nil, At: at(3)})
	require.NoError(t, err)
	require.Zero(t, won)
}

// KeyBlock records what the key is blocked behind (nothing, for a gap);
// KeyUnblock clears it. Neither touches the version or creates a key.
func testBlockKey(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	e.ensureKeys(at(0), "order-1", "order-2")
	_, err := tx.KeyAdvance(ctx, store.KeyAdvanceParams{Consumer: e.consumer, Key: "order-1", Prev: nil, Next: 4, At: at(1)})
	require.NoError(t, err)

	require.NoError(t, tx.KeyBlock(ctx, store.KeyBlockParams{Consumer: e.consumer, Key: "order-1", Source: "crm", ID: "m-5", Reason: "handler failed: boom", At: at(2)}))
	want := store.KeyState{
		Consumer: e.consumer, Key: "order-1", Version: ptr(int64(4)), Baseline: ptr(int64(4)), Blocked: true,
		BlockedSource: "crm", BlockedID: "m-5", BlockedReason: "handler failed: boom",
		BlockedSince: at(2), UpdatedAt: at(2),
	}
	require.Equal(t, want, e.key("order-1"))
	require.NoError(t, tx.KeyBlock(ctx, store.KeyBlockParams{Consumer: e.consumer, Key: "order-2", Source: "", ID: "", Reason: "gap before version 3", At: at(3)}))
	require.Equal(t, store.KeyState{
		Consumer: e.consumer, Key: "order-2", Blocked: true, BlockedReason: "gap before version 3",
		BlockedSince: at(3), UpdatedAt: at(3),
	}, e.key("order-2"), "a gap block names no message")

	require.NoError(t, tx.KeyUnblock(ctx, store.KeyUnblockParams{Consumer: e.consumer, Key: "order-1", At: at(4)}))
	require.Equal(t, store.KeyState{Consumer: e.consumer, Key: "order-1", Version: ptr(int64(4)), Baseline: ptr(int64(4)), UpdatedAt: at(4)},
		e.key("order-1"))
	require.True(t, e.key("order-2").Blocked, "another key stays blocked")

	require.NoError(t, tx.KeyBlock(ctx, store.KeyBlockParams{Consumer: e.consumer, Key: "order-3", Source: "crm", ID: "x", Reason: "r", At: at(5)}))
	_, err = tx.KeyLock(ctx, store.KeyRef{Consumer: e.consumer, Key: "order-3"})
	require.ErrorIs(t, err, store.ErrNotFound, "blocking a missing key creates nothing")
}

// KeyLockMany returns exactly the keys that exist, each as Tx.Key reads it
// (flags included), whatever the order, the repeats and the number of
// keys asked for, and leaves the caller's slice as it was.
func testLockKeys(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	const n = 300
	key := func(i int) string { return fmt.Sprintf("k-%03d-ü", i) }
	var ask []string
	want := map[string][2]bool{} // HasParked, HasRetries
	for i := range n {
		ask = append(ask, key(i))
		if i%4 == 0 {
			continue // never seen
		}
		e.ensureKeys(at(i), key(i))
		if i%6 == 1 {
			_, err := tx.KeyAdvance(ctx, store.KeyAdvanceParams{Consumer: e.consumer, Key: key(i), Prev: nil, Next: int64(i), At: at(i + 1)})
			require.NoError(t, err)
		}
		if i%10 == 5 {
			require.NoError(t, tx.KeyBlock(ctx, store.KeyBlockParams{Consumer: e.consumer, Key: key(i), Source: "crm", ID: fmt.Sprint(i), Reason: "boom", At: at(i + 2)}))
		}
		var flags [2]bool
		if i%5 == 1 || i%7 == 2 {
			e.park(e.parked(key(i), "crm", fmt.Sprint(i), nil, seqboxtype.ParkHeld, i))
			flags[0] = true
		}
		if i%5 == 2 || i%7 == 2 {
			e.retry(key(i), "crm", fmt.Sprint(i), "boom", i)
			flags[1] = true
		}
		want[key(i)] = flags
	}
	// Another consumer's key with the same name, parked and retrying.
	other := e.consumer + "/other"
	require.NoError(t, tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: other, Key: key(3), At: at(0)}))
	p := e.parked(key(3), "crm", "o", nil, seqboxtype.ParkHeld, 0)
	p.Consumer = other
	e.park(p)
	for i := range 10 {
		ask = append(ask, fmt.Sprintf("absent-%d", i), key(i*29%n), key(i*29%n))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rng.Shuffle(len(ask), func(i, j int) { ask[i], ask[j] = ask[j], ask[i] })
	asked := slices.Clone(ask)

	got, err := tx.KeyLockMany(ctx, store.KeyLockManyParams{Consumer: e.consumer, Keys: ask})
	require.NoError(t, err)
	require.Equal(t, asked, ask, "the caller's keys are left as they were")
	require.Len(t, got, len(want), "only the keys that exist")
	for k, flags := range want {
		ks, ok := got[k]
		require.True(t, ok, "key %s", k)
		require.Equal(t, flags, [2]bool{ks.HasParked, ks.HasRetries}, "key %s: HasParked, HasRetries", k)
		require.Equal(t, e.key(k), ks, "key %s as Tx.Key reads it", k)
	}
	require.False(t, got[key(3)].HasParked, "another consumer's parked message does not count")

	one, err := tx.KeyLockMany(ctx, store.KeyLockManyParams{Consumer: e.consumer, Keys: []string{key(1), key(1)}})
	require.NoError(t, err)
	require.Equal(t, map[string]store.KeyState{key(1): got[key(1)]}, one)
}

// KeyLockMany of no keys (or only missing ones) returns an empty map.
func testLockKeysEmpty(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	got, err := e.tx.KeyLockMany(e.ctx, store.KeyLockManyParams{Consumer: e.consumer, Keys: nil})
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = e.tx.KeyLockMany(e.ctx, store.KeyLockManyParams{Consumer: e.consumer, Keys: []string{"missing"}})
	require.NoError(t, err)
	require.Empty(t, got)
}

// KeyEnsureMany creates the missing keys with no version, repeats allowed,
// across chunk boundaries; keys that exist keep their state.
func testEnsureKeys(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	const n = 300
	key := func(i int) string { return fmt.Sprintf("order-%03d", i) }
	var keys []string
	for i := range n {
		keys = append(keys, key(i))
		if i%9 == 0 {
			keys = append(keys, key(i)) // the pipeline may name a key twice
		}
		if i%11 == 0 {
			e.ensureKeys(at(1), key(i))
			_, err := tx.KeyAdvance(ctx, store.KeyAdvanceParams{Consumer: e.consumer, Key: key(i), Prev: nil, Next: int64(i), At: at(2)})
			require.NoError(t, err)
		}
	}
	keys = append(keys, key(5), key(250), key(0))
	require.NoError(t, tx.KeyEnsureMany(ctx, store.KeyEnsureManyParams{Consumer: e.consumer, Keys: keys, At: at(3)}))
	require.Equal(t, n, e.count("seqbox_keys", ""))
	check := func() {
		t.Helper()
		got, err := tx.KeyLockMany(ctx, store.KeyLockManyParams{Consumer: e.consumer, Keys: keys})
		require.NoError(t, err)
		require.Len(t, got, n)
		for i := range n {
			want := store.KeyState{Consumer: e.consumer, Key: key(i), UpdatedAt: at(3)}
			if i%11 == 0 {
				want.Version, want.Baseline, want.UpdatedAt = ptr(int64(i)), ptr(int64(i)), at(2)
			}
			require.Equal(t, want, got[key(i)])
		}
	}
	check()
	require.NoError(t, tx.KeyEnsureMany(ctx, store.KeyEnsureManyParams{Consumer: e.consumer, Keys: keys, At: at(4)}))
	check()
	require.NoError(t, tx.KeyEnsureMany(ctx, store.KeyEnsureManyParams{Consumer: e.consumer, Keys: nil, At: at(5)}))
}
