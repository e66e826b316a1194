package bench

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLatencyOfIsNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := LatencyOf(ds)
	require.Equal(t, Latency{N: 100, P50: 50 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}, l)
	require.Equal(t, Latency{N: 1, P50: time.Second, P99: time.Second, Max: time.Second}, LatencyOf([]time.Duration{time.Second}))
	require.Equal(t, Latency{}, LatencyOf(nil))
}

func TestBodyIsAnOrderedEvent(t *testing.T) {
	for i, want := range []struct {
		key string
		ver int64
	}{{"run-k0", 1}, {"run-k1", 1}, {"run-k2", 1}, {"run-k0", 2}} {
		b := Body("bench", "p", "run", i, 3)
		ev, err := seqboxtype.ParseEvent(b)
		require.NoError(t, err)
		require.Equal(t, "bench", ev.Source)
		require.Equal(t, want.key, ev.PartitionKey)
		require.Equal(t, want.ver, *ev.ObjectVersion)
		require.Equal(t, ev.ID, idOf(b))
	}
	require.Equal(t, "", idOf([]byte(`{"source":"x","id":"y"}`)))
}

// openSQLite opens a fresh SQLite bench environment.
func openSQLite(t *testing.T) *env {
	t.Helper()
	e, err := open(context.Background(), filepath.Join(t.TempDir(), "seqbox.db"), "bench-test")
	require.NoError(t, err)
	t.Cleanup(e.close)
	return e
}

// The purge check counts what a purge at a given time would remove, and a
// real purge removes exactly that and keeps held identities.
func TestSeedCountsAndPurge(t *testing.T) {
	ctx := context.Background()
	e := openSQLite(t)
	expired := time.Now().Add(-time.Hour)
	require.NoError(t, seed(ctx, e, "seed", "applied", 50, expired))
	require.NoError(t, seed(ctx, e, "held", "held", 5, expired))
	require.NoError(t, seed(ctx, e, "live", "applied", 7, time.Now().Add(24*time.Hour)))
	now := time.Now()
	c, err := countInbox(ctx, e, now, "seed", "held", "live")
	require.NoError(t, err)
	require.Equal(t, inboxCounts{Purgeable: 50, Seeded: 50, Held: 5, Live: 7}, c)

	times := &purgeTimes{}
	purger, err := seqbox.NewConsumer(seqbox.Config{Name: Consumer, Store: timedStore{Store: e.st, times: times},
		Handler: replay.RecordHandler(Consumer), Now: func() time.Time { return now }})
	require.NoError(t, err)
	n, err := purger.Purge(ctx, 20)
	require.NoError(t, err)
	require.EqualValues(t, 50, n)
	require.Len(t, times.all(), 3, "50 rows in batches of 20: 20, 20, 10")

	c, err = countInbox(ctx, e, now, "seed", "held", "live")
	require.NoError(t, err)
	require.Equal(t, inboxCounts{Purgeable: 0, Seeded: 0, Held: 5, Live: 7}, c)
}

// The check fails, and says so, whenever the purge left an expired row,
// removed a held or live one, or removed more or less than had expired.
func TestCheckPurgeFails(t *testing.T) {
	before := inboxCounts{Purgeable: 10, Seeded: 10, Held: 2}
	good := inboxCounts{Held: 2, Live: 4, LiveEffects: 4}
	var out bytes.Buffer
	require.NoError(t, checkPurge(&out, PurgeResult{Removed: 10}, before, good, 2, 4, 0, ""))
	require.Contains(t, out.String(), " ok\n")

	for name, tc := range map[string]struct {
		removed int64
		after   inboxCounts
	}{
		"expired row left":   {9, inboxCounts{Seeded: 1, Purgeable: 1, Held: 2, Live: 4, LiveEffects: 4}},
		"held row purged":    {11, inboxCounts{Held: 1, Live: 4, LiveEffects: 4}},
		"live row purged":    {11, inboxCounts{Held: 2, Live: 3, LiveEffects: 4}},
		"no live traffic":    {10, inboxCounts{Held: 2}},
		"removed miscounted": {12, good},
	} {
		out.Reset()
		err := checkPurge(&out, PurgeResult{Removed: tc.removed}, before, tc.after, 2, 4, 0, "")
		require.Error(t, err, name)
		require.Contains(t, out.String(), " FAILED\n", name)
	}
}

// The raw limit writes and checks every row, and cleans up after itself.
func TestRawInsertStoresEveryRow(t *testing.T) {
	ctx := context.Background()
	e := openSQLite(t)
	res, err := RawInsert(ctx, e.st.DB(), false, "r1", Bodies("bench", "x", "r1", 100, 7), 16, 3)
	require.NoError(t, err)
	require.EqualValues(t, 100, res.Rows)
	require.Equal(t, 100, res.Latency.N)
	var left int
	require.NoError(t, e.st.DB().QueryRow(`SELECT COUNT(*) FROM bench_raw`).Scan(&left))
	require.Zero(t, left)
}
