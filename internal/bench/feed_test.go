package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// At a rate the feed publishes once a tick, what is due, however long a
// publish takes; it publishes again at once only to catch up a shortfall
// larger than one publish carries.
func TestFeedPublishesOnceATick(t *testing.T) {
	const rate, tick, publishTakes = 1000, 10 * time.Millisecond, time.Millisecond
	var published int64
	publishes := 0
	at := time.Duration(0)
	// run is the feed's loop at one tick: publish while feedDue says so,
	// each publish taking publishTakes.
	run := func() {
		for {
			n, again := feedDue(rate, at, published, false)
			if n == 0 {
				return
			}
			published += int64(n)
			publishes++
			at += publishTakes
			if !again {
				return
			}
		}
	}
	for i := 1; i <= 100; i++ {
		at = time.Duration(i) * tick
		run()
	}
	require.Equal(t, 100, publishes, "one publish a tick, not one each time a publish returns")
	require.EqualValues(t, 1000, published, "ten messages a tick at 1,000 a second")

	// A stall of 3 s: 3,000 due, more than one publish carries; the feed
	// catches up at once, in publishes of at most maxPublish.
	at = 4 * time.Second
	before := publishes
	run()
	require.EqualValues(t, 4001, published, "caught up before the next tick (with the millisecond the first publish took)")
	require.Equal(t, 2, publishes-before, "2,000, then the 1,001 due by then")

	// Without a rate it keeps a backlog: a chunk again and again while it
	// is low, nothing when it is not.
	n, again := feedDue(0, time.Second, 0, true)
	require.Equal(t, feedChunk, n)
	require.True(t, again)
	n, _ = feedDue(0, time.Second, 0, false)
	require.Zero(t, n)
}
