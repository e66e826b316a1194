package seqbox

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// With batches of one size the sizer cannot split a batch's time into a
// fixed part and a part per message, and takes the time per message with
// the fixed part in it: batches that overrun half the target shrink the
// cap, batches that fit grow it, and a backlog past the target lifts it
// to BatchSize.
func TestBatchSizerFollowsTheCostPerMessage(t *testing.T) {
	z := newBatchSizer(Config{TargetLatency: 20 * time.Millisecond, BatchSize: 512})
	require.Equal(t, 512, z.limit(0), "it starts at BatchSize: a backlog's first batch is whole")

	// 100 µs a message: 100 fit in the 10 ms budget.
	for range 60 {
		n := z.limit(0)
		z.observe(n, time.Duration(n)*100*time.Microsecond)
	}
	require.InDelta(t, 100, z.limit(0), 3)

	// The store slows down tenfold: the cap follows down.
	for range 60 {
		n := z.limit(0)
		z.observe(n, time.Duration(n)*time.Millisecond)
	}
	require.InDelta(t, 10, z.limit(0), 1)

	// One message slower than the budget: the cap stays at the floor, a
	// few messages still share a commit.
	for range 60 {
		z.observe(z.limit(0), time.Duration(z.limit(0))*50*time.Millisecond)
	}
	require.Equal(t, minBatchCap, z.limit(0))

	require.Equal(t, 512, z.limit(25*time.Millisecond), "past the target: drain with full batches")
	require.Equal(t, 0, (*batchSizer)(nil).limit(time.Hour), "no target: the caller's BatchSize")
	require.Nil(t, newBatchSizer(Config{TargetLatency: -1, BatchSize: 512}))
}

// sizesFrom runs batches through z whose sizes follow ready (clipped to
// the cap, as take does) and whose time is fixed + perMessage × size.
func sizesFrom(z *batchSizer, batches int, ready func(i int) int, fixed, perMessage time.Duration) {
	for i := range batches {
		n := min(ready(i), z.limit(0))
		z.observe(n, fixed+time.Duration(n)*perMessage)
	}
}

// A batch's fixed part (its round trips, its commit) is paid whatever its
// size, so the cap keeps only the part per message within the budget.
// On a busy machine the fixed part of a batch grows to most of the
// budget; a cap sized by a batch's whole time would shrink batches to
// what fits beside it, so that more batches pay it and the machine gets
// busier still (docs/benchmarks-history.md §13).
func TestBatchSizerBudgetsThePartPerMessage(t *testing.T) {
	cycle := func(i int) int { return 10 + 37*i%150 } // 10…159 ready, varied

	// 8 ms fixed and 100 µs a message: 100 messages' own part fits the
	// 10 ms budget; the whole time would have allowed 20.
	z := newBatchSizer(Config{TargetLatency: 20 * time.Millisecond, BatchSize: 512})
	sizesFrom(z, 200, cycle, 8*time.Millisecond, 100*time.Microsecond)
	require.InDelta(t, 100, z.limit(0), 5)

	// A handler that costs 1 ms a message: 10 fit, whatever the fixed part.
	sizesFrom(z, 200, cycle, time.Millisecond, time.Millisecond)
	require.InDelta(t, 10, z.limit(0), 1)

	// A fixed part past the whole target: the target is lost whatever the
	// size, and a small cap would only add batches.
	sizesFrom(z, 200, cycle, 50*time.Millisecond, 20*time.Microsecond)
	require.InDelta(t, 500, z.limit(0), 5, "10 ms / 20 µs: 500, where the whole time would have held the floor")
}

// Light traffic makes small batches because little is ready, not because
// the cap says so: they do not shrink the cap a burst then meets.
func TestBatchSizerLightTrafficKeepsTheCap(t *testing.T) {
	z := newBatchSizer(Config{TargetLatency: 20 * time.Millisecond, BatchSize: 512})
	sizesFrom(z, 200, func(i int) int { return 1 + i%4 }, 2*time.Millisecond, 40*time.Microsecond)
	require.InDelta(t, 250, z.limit(0), 3, "10 ms / 40 µs: a burst meets a cap of 250, not twice the light batches")
}

// take honours the sizer's cap while the oldest ready delivery is within
// the target, and takes up to BatchSize once it is past it.
func TestSchedulerTakesWhatTheSizerAllows(t *testing.T) {
	z := newBatchSizer(Config{TargetLatency: 20 * time.Millisecond, BatchSize: 100})
	for range 40 {
		z.observe(z.limit(0), time.Duration(z.limit(0))*time.Millisecond) // 10 fit
	}
	s := newScheduler(1000)
	for i := range 100 {
		s.add("u:"+strconv.Itoa(i), &stub{name: strconv.Itoa(i)})
	}
	b := s.take(context.Background(), 100, z)
	require.Len(t, b.deliveries, z.limit(0), "within the target: the cap")
	// The deliveries still ready were received 30 ms ago: past the target.
	for d := range s.live {
		s.live[d] = s.live[d].Add(-30 * time.Millisecond)
	}
	b = s.take(context.Background(), 100, z)
	require.Len(t, b.deliveries, 100-z.limit(0), "past the target: everything ready, up to BatchSize")
}
