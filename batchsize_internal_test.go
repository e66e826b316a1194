package seqbox

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The cap follows the cost per message: batches that overrun half the
// target shrink it, batches that fit grow it (at most twofold a batch),
// and a backlog past the target lifts it to BatchSize.
func TestBatchSizerFollowsTheCostPerMessage(t *testing.T) {
	z := newBatchSizer(Config{TargetLatency: 20 * time.Millisecond, BatchSize: 512})
	require.Equal(t, 512, z.limit(0), "it starts at BatchSize: a backlog's first batch is whole")

	// 100 µs a message: 100 fit in the 10 ms budget.
	for range 40 {
		n := z.limit(0)
		z.observe(n, time.Duration(n)*100*time.Microsecond)
	}
	require.InDelta(t, 100, z.limit(0), 3)

	// The store slows down tenfold: the cap follows down.
	for range 40 {
		n := z.limit(0)
		z.observe(n, time.Duration(n)*time.Millisecond)
	}
	require.InDelta(t, 10, z.limit(0), 1)

	// A commit slower than the budget on its own: the cap stays at the
	// floor, a few messages still share a commit.
	for range 40 {
		z.observe(z.limit(0), 50*time.Millisecond)
	}
	require.Equal(t, minBatchCap, z.limit(0))

	// Light traffic (single messages, fast): the cap grows only to what
	// such batches vouch for.
	for range 40 {
		z.observe(1, 200*time.Microsecond)
	}
	require.Equal(t, minBatchCap, z.limit(0), "batches of one vouch for two")

	require.Equal(t, 512, z.limit(25*time.Millisecond), "past the target: drain with full batches")
	require.Equal(t, 0, (*batchSizer)(nil).limit(time.Hour), "no target: the caller's BatchSize")
	require.Nil(t, newBatchSizer(Config{TargetLatency: -1, BatchSize: 512}))
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
