package outbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/seqbox/seqbox/outbox"
	"github.com/stretchr/testify/require"
)

// pruneClock is a relay's clock the test moves.
type pruneClock struct {
	mu  sync.Mutex
	now time.Time
}

func newPruneClock() *pruneClock {
	return &pruneClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *pruneClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *pruneClock) pass(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// outboxRows counts the outbox's events.
func outboxRows(t *testing.T, s *stage) int {
	t.Helper()
	var n int
	require.NoError(t, s.st.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_outbox`).Scan(&n))
	return n
}

// drain runs r's rounds until one publishes nothing.
func drain(t *testing.T, r *outbox.Relay) {
	t.Helper()
	for {
		n, err := r.RunOnce(context.Background())
		require.NoError(t, err)
		if n == 0 {
			return
		}
	}
}

// The active relay removes the events published more than Config.Keep
// ago, once a minute, and leaves the others. Before, every event ever
// emitted stayed in the outbox, body and all. A negative Keep removes
// none.
func TestTheRelayPrunesWhatItPublishedLongAgo(t *testing.T) {
	stages(t, func(t *testing.T, where func(t *testing.T) string) {
		up := openStage(t, where(t))
		q := openQueue(t, up.where)
		clock := newPruneClock()
		rows := func() int { return outboxRows(t, up) }
		pass := clock.pass
		r, err := outbox.NewRelay(up.st, q, outbox.Config{Keep: time.Hour, Now: clock.Now})
		require.NoError(t, err)
		forever, err := outbox.NewRelay(up.st, q, outbox.Config{Name: "forever", Keep: -1, Now: clock.Now})
		require.NoError(t, err)

		emitAll(t, up, 3, 1) // three events, published now
		drain(t, r)
		require.Equal(t, 3, rows(), "published a moment ago: kept")
		pass(2 * time.Hour)
		emitAll(t, up, 2, 2) // four more: versions 1 and 2 of two keys
		n, err := forever.Prune(context.Background())
		require.NoError(t, err)
		require.Zero(t, n, "a negative Keep keeps them")
		drain(t, r) // its first round prunes: a minute has passed since the last
		require.Equal(t, 4, rows(), "the three published two hours ago went; the four published now stay")
		require.Equal(t, uint64(3), r.Stats().Pruned)
		n, err = r.Prune(context.Background())
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

// An event published less than Keep ago stays (not only one published
// this instant); the active relay prunes at most once a minute; what it
// pruned reaches seqbox_outbox_pruned_total (a mutation run's survivors:
// Prune with Before at now, no throttle, the counter fed another count).
func TestTheRelayKeepsWhatIsYoungerThanKeepAndPrunesOnceAMinute(t *testing.T) {
	stages(t, func(t *testing.T, where func(t *testing.T) string) {
		up := openStage(t, where(t))
		q := openQueue(t, up.where)
		clock := newPruneClock()
		pass := clock.pass
		rows := func() int { return outboxRows(t, up) }
		round := func(r *outbox.Relay) {
			_, err := r.RunOnce(context.Background())
			require.NoError(t, err)
		}
		r, err := outbox.NewRelay(up.st, q, outbox.Config{Keep: time.Hour, Now: clock.Now})
		require.NoError(t, err)
		emitAll(t, up, 3, 1)
		for range 3 {
			round(r) // publishes them (and prunes nothing)
		}
		require.Equal(t, 3, rows())

		pass(30 * time.Minute)
		n, err := r.Prune(context.Background())
		require.NoError(t, err)
		require.Zero(t, n, "published half of Keep ago: kept")
		require.Equal(t, 3, rows())

		pass(29*time.Minute + 30*time.Second)
		round(r) // due: prunes, but nothing is older than Keep yet
		require.Equal(t, 3, rows())
		pass(40 * time.Second) // older than Keep now, but the last prune was 40 s ago
		round(r)
		require.Equal(t, 3, rows(), "the relay pruned twice within a minute")
		emitKey(t, up, "late", 1)
		round(r) // publishes it
		require.Equal(t, 4, rows())
		pass(30 * time.Second)
		round(r)
		require.Equal(t, 1, rows(), "a minute after the last prune, the next round prunes")
		require.Equal(t, outbox.Stats{Published: 4, Pruned: 3}, r.Stats())
		require.NoError(t, testutil.CollectAndCompare(outbox.NewCollector(r), strings.NewReader(`
# HELP seqbox_outbox_pruned_total Published outbox events the relay removed once Config.Keep had passed.
# TYPE seqbox_outbox_pruned_total counter
seqbox_outbox_pruned_total{relay="default"} 3
`), "seqbox_outbox_pruned_total"))
	})
}

// One Prune goes on past its first batch of 1,000.
func TestOnePruneRemovesMoreThanOneBatch(t *testing.T) {
	stages(t, func(t *testing.T, where func(t *testing.T) string) {
		up := openStage(t, where(t))
		q := openQueue(t, up.where)
		clock := newPruneClock()
		r, err := outbox.NewRelay(up.st, q, outbox.Config{Keep: time.Hour, Now: clock.Now, Batch: 1000})
		require.NoError(t, err)
		emitAll(t, up, 2500, 1)
		drain(t, r)
		clock.pass(2 * time.Hour)
		n, err := r.Prune(context.Background())
		require.NoError(t, err)
		require.Equal(t, int64(2500), n, "one Prune goes on past its first batch of 1,000")
	})
}
