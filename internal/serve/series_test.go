package serve

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/seqboxtype"
)

// The chart's series starts in the bucket the server started in: no
// bucket before it is given, not even as zeros; once the server has run
// for the whole window, the window is full.
func TestSeriesStartsWhenTheServerStarted(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 7, 0, time.UTC)
	o := newOutcomeSeries(func() time.Time { return now })
	_, points := o.snapshot()
	require.Len(t, points, 1, "only the bucket the server started in")
	require.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), points[0].Start)

	o.observe(seqboxtype.Result{Outcome: seqboxtype.Applied})
	now = now.Add(time.Minute)
	o.observe(seqboxtype.Result{Outcome: seqboxtype.DeadLettered})
	totals, points := o.snapshot()
	require.Len(t, points, 13, "a minute of 5 s buckets, and the one it started in")
	require.EqualValues(t, 1, points[0].Counts["applied"])
	require.EqualValues(t, 1, points[12].Counts["dead_lettered"])
	require.EqualValues(t, 1, totals["applied"])
	require.EqualValues(t, 0, totals["stale"], "every outcome has a total")

	now = now.Add(time.Hour)
	_, points = o.snapshot()
	require.Len(t, points, seriesLen, "the whole window once the server ran that long")
}
