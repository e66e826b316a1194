package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seqbox/seqbox/outbox"
	"github.com/stretchr/testify/require"
)

// The active relay removes the events published more than Config.Keep
// ago, once a minute, and leaves the others. Before, every event ever
// emitted stayed in the outbox, body and all. A negative Keep removes
// none.
func TestTheRelayPrunesWhatItPublishedLongAgo(t *testing.T) {
	stages(t, func(t *testing.T, where func(t *testing.T) string) {
		up := openStage(t, where(t))
		q := openQueue(t, up.where)
		var mu sync.Mutex
		now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		pass := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
		rows := func() int {
			var n int
			require.NoError(t, up.st.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_outbox`).Scan(&n))
			return n
		}
		drain := func(r *outbox.Relay) {
			for {
				n, err := r.RunOnce(context.Background())
				require.NoError(t, err)
				if n == 0 {
					return
				}
			}
		}
		r, err := outbox.NewRelay(up.st, q, outbox.Config{Keep: time.Hour, Now: clock})
		require.NoError(t, err)
		forever, err := outbox.NewRelay(up.st, q, outbox.Config{Name: "forever", Keep: -1, Now: clock})
		require.NoError(t, err)

		emitAll(t, up, 3, 1) // three events, published now
		drain(r)
		require.Equal(t, 3, rows(), "published a moment ago: kept")
		pass(2 * time.Hour)
		emitAll(t, up, 2, 2) // four more: versions 1 and 2 of two keys
		n, err := forever.Prune(context.Background())
		require.NoError(t, err)
		require.Zero(t, n, "a negative Keep keeps them")
		drain(r) // its first round prunes: a minute has passed since the last
		require.Equal(t, 4, rows(), "the three published two hours ago went; the four published now stay")
		require.Equal(t, uint64(3), r.Stats().Pruned)
		n, err = r.Prune(context.Background())
		require.NoError(t, err)
		require.Zero(t, n)
	})
}
