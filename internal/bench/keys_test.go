package bench

import (
	"context"
	"runtime"
	"testing"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// Seeded keys are exactly the named ones; the count and the clean-up see
// only them.
func TestSeedKeysAndCleanUp(t *testing.T) { testSeedKeys(t, openSQLite(t)) }

func TestSeedKeysAndCleanUpPostgres(t *testing.T) { testSeedKeys(t, openPostgres(t)) }

func testSeedKeys(t *testing.T, e *env) {
	ctx := context.Background()
	_, err := seedKeys(ctx, e, "a-", 2500)
	require.NoError(t, err)
	_, err = seedKeys(ctx, e, "b-", 10)
	require.NoError(t, err)
	all, versioned, err := keyRows(ctx, e, "a-")
	require.NoError(t, err)
	require.EqualValues(t, 2500, all)
	require.Zero(t, versioned)
	var name string
	require.NoError(t, e.st.DB().QueryRow(`SELECT MAX(partitionkey) FROM seqbox_keys WHERE consumer = $1 AND partitionkey < 'b'`, Consumer).Scan(&name))
	require.Equal(t, keyName("a-", 2499), name)
	require.Equal(t, "a-0002499", name)

	require.NoError(t, dropUnusedKeys(ctx, e, "a-"))
	all, _, err = keyRows(ctx, e, "a-")
	require.NoError(t, err)
	require.Zero(t, all)
	all, _, err = keyRows(ctx, e, "b-")
	require.NoError(t, err)
	require.EqualValues(t, 10, all, "another prefix's keys are left alone")
	require.Equal(t, "a.", prefixEnd("a-"))
}

// Each case applies every message once, in version order per key (a
// message out of order would be held, and the case would fail): uniform,
// Zipf, and on seeded keys, where no key row is created and the untouched
// ones are removed afterwards.
func TestRunKeyCase(t *testing.T) { testRunKeyCase(t, openSQLite(t)) }

func TestRunKeyCasePostgres(t *testing.T) { testRunKeyCase(t, openPostgres(t)) }

func testRunKeyCase(t *testing.T, e *env) {
	ctx := context.Background()
	for i, c := range []keyCase{{keys: 1, n: 200}, {keys: 7, n: 200}, {keys: 50, n: 300, zipfS: zipfS},
		{keys: 1000, n: 300, seed: true}} {
		prefix := "t" + string(rune('a'+i)) + "-"
		r, err := runKeyCase(ctx, e, prefix, c, 2, 16)
		require.NoError(t, err, "%+v", c)
		require.Equal(t, c.n, r.lat.N, "every message has its receive→commit latency")
		require.Positive(t, r.elapsed)
		all, versioned, err := keyRows(ctx, e, prefix)
		require.NoError(t, err)
		require.Equal(t, all, versioned, "every key row left has a version")
		switch {
		case c.seed:
			require.EqualValues(t, 300, all, "300 messages on 300 of the 1000 seeded keys")
			require.Contains(t, r.note, "after the run 1000 rows, 300 of them versioned")
		case c.zipfS > 0:
			require.Less(t, all, int64(c.keys), "a Zipf spread leaves keys unused")
			require.Contains(t, r.note, "hottest key")
		default:
			require.EqualValues(t, c.keys, all)
		}
		var effects int
		require.NoError(t, e.st.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_record_effects WHERE consumer = $1 AND id LIKE $2`,
			Consumer, prefix+"%").Scan(&effects))
		require.Equal(t, c.n, effects)
	}
}

// openPostgres opens a bench environment in a fresh PostgreSQL schema.
func openPostgres(t *testing.T) *env {
	t.Helper()
	e, err := open(context.Background(), pgtest.URL(t), "bench-test")
	require.NoError(t, err)
	t.Cleanup(e.close)
	return e
}

// The window's peak is its own: memory touched inside it shows, memory
// touched before it does not.
func TestRSSWindow(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	touch(make([]byte, 64<<20))
	w := openRSS()
	inside := make([]byte, 48<<20)
	touch(inside)
	u := w.close()
	runtime.KeepAlive(inside)
	require.True(t, u.Known)
	require.Positive(t, u.Base)
	require.GreaterOrEqual(t, u.Increase(), int64(40<<10), "48 MiB touched in the window: %+v", u)
	if u.Windowed {
		require.Less(t, u.Increase(), int64(100<<10), "the 64 MiB freed before the window is not its peak: %+v", u)
	}
	require.Contains(t, u.Source(), "VmHWM")
}

func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
}
