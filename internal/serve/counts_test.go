package serve

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/testclock"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// The overview reads the stuck counts at every call, but counts the
// inbox (every identity the retention keeps: seconds at ten million)
// again only once the last count is no longer fresh, and says when it
// counted. Before, the console's poll every 2 s counted the whole inbox
// each time.
func TestTheOverviewCountsTheInboxOnlyWhenItsCountIsStale(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := start(t, Options{DB: db(t)})
			clock := testclock.At(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
			r.inboxCounts.mu.Lock()
			r.inboxCounts.now = clock.Now
			r.inboxCounts.mu.Unlock()
			counts := func() map[string]any {
				return r.admin(t, "GET", "/v1/admin/overview", "", 200)["counts"].(map[string]any)
			}
			inboxRows := func() int64 {
				c, err := r.store.Executor().Counts(context.Background(), r.opt.Consumer)
				require.NoError(t, err)
				return c.InboxRows
			}

			r.post(t, ev("e1", "k", 1, `{"n":1}`))
			eventually(t, "e1 applied", func() bool { return inboxRows() == 1 })
			first := counts()
			require.EqualValues(t, 1, first["inbox_rows"])
			require.Equal(t, "2026-12-07T10:00:00Z", first["inbox_counted_at"])

			r.post(t, ev("e2", "k", 2, `{"n":2}`))
			r.post(t, ev("e4", "k", 4, `{"n":4}`))
			eventually(t, "e4 held", func() bool { return counts()["held"] == float64(1) })
			require.EqualValues(t, 3, inboxRows())
			again := counts()
			require.EqualValues(t, 1, again["inbox_rows"], "the inbox is not counted again within 2 s")
			require.Equal(t, first["inbox_counted_at"], again["inbox_counted_at"])
			require.EqualValues(t, 1, again["held"], "the stuck counts are read at each call")

			clock.Advance(inboxCountsFresh)
			later := counts()
			require.EqualValues(t, 3, later["inbox_rows"], "counted again once stale")
			require.Equal(t, "2026-12-07T10:00:02Z", later["inbox_counted_at"])
		})
	}
}

// One count runs at a time: a caller that finds none yet waits for the
// one under way, and once there is one, a caller answers with it while
// the next count runs; a count that took long stays fresh longer.
func TestOneInboxCountAtATime(t *testing.T) {
	clock := testclock.At(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	ic := &inboxCounts{now: clock.Now}
	ctx := context.Background()
	release := make(chan struct{})
	var started sync.WaitGroup
	counted := 0
	count := func(n int64, took time.Duration) func(context.Context) (store.Counts, error) {
		return func(context.Context) (store.Counts, error) {
			counted++
			started.Done()
			<-release
			clock.Advance(took)
			return store.Counts{InboxRows: n}, nil
		}
	}

	started.Add(1)
	first := make(chan store.Counts)
	go func() {
		c, _, err := ic.get(ctx, count(1, time.Second))
		require.NoError(t, err)
		first <- c
	}()
	started.Wait()
	waiter := make(chan store.Counts)
	go func() {
		c, _, err := ic.get(ctx, func(context.Context) (store.Counts, error) {
			t.Error("a second count while the first runs")
			return store.Counts{}, nil
		})
		require.NoError(t, err)
		waiter <- c
	}()
	close(release)
	require.EqualValues(t, 1, (<-first).InboxRows)
	require.EqualValues(t, 1, (<-waiter).InboxRows, "the caller that found no count waited for the first")

	// Began at 10:00:00 and took 1 s: fresh until 10:00:20.
	clock.Advance(18 * time.Second)
	c, _, err := ic.get(ctx, count(2, 0))
	require.NoError(t, err)
	require.EqualValues(t, 1, c.InboxRows, "fresh for twenty times what it took")
	require.Equal(t, 1, counted)

	clock.Advance(time.Second)
	release = make(chan struct{})
	started.Add(1)
	second := make(chan store.Counts)
	go func() {
		c, _, err := ic.get(ctx, count(2, 0))
		require.NoError(t, err)
		second <- c
	}()
	started.Wait()
	c, at, err := ic.get(ctx, count(3, 0))
	require.NoError(t, err)
	require.EqualValues(t, 1, c.InboxRows, "while a count runs, the last one answers")
	require.Equal(t, "2026-12-07T10:00:00Z", at.Format(time.RFC3339))
	close(release)
	require.EqualValues(t, 2, (<-second).InboxRows)
	require.Equal(t, 2, counted)
}
