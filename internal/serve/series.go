package serve

import (
	"sync"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
)

// seriesBucket is the width of one point of the outcomes chart.
const seriesBucket = 5 * time.Second

// seriesLen is how many buckets the chart keeps (10 minutes).
const seriesLen = 120

// outcomeSeries counts committed results per outcome, in total and per
// time bucket, for the dashboard's overview and chart. It lives in memory:
// Prometheus keeps the history.
type outcomeSeries struct {
	mu      sync.Mutex
	totals  map[seqboxtype.Outcome]int64
	buckets []bucket
	now     func() time.Time
	// since is when the server started: nothing before it is known, so
	// no bucket that ended before it is given (not even as zeros).
	since time.Time
}

type bucket struct {
	start  time.Time
	counts map[seqboxtype.Outcome]int64
}

// SeriesPoint is one bucket of the outcomes chart.
type SeriesPoint struct {
	Start  time.Time        `json:"start"`
	Counts map[string]int64 `json:"counts"`
}

func newOutcomeSeries(now func() time.Time) *outcomeSeries {
	return &outcomeSeries{totals: map[seqboxtype.Outcome]int64{}, now: now, since: now()}
}

// observe counts one committed result (Config.Observer).
func (o *outcomeSeries) observe(res seqboxtype.Result) {
	start := o.now().Truncate(seriesBucket)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.totals[res.Outcome]++
	if n := len(o.buckets); n == 0 || o.buckets[n-1].start.Before(start) {
		o.buckets = append(o.buckets, bucket{start: start, counts: map[seqboxtype.Outcome]int64{}})
		if len(o.buckets) > seriesLen {
			o.buckets = o.buckets[len(o.buckets)-seriesLen:]
		}
	}
	o.buckets[len(o.buckets)-1].counts[res.Outcome]++
}

// snapshot returns the totals and the last seriesLen buckets, empty ones
// included, oldest first, from the bucket the server started in: a
// server up for less than the window has fewer points.
func (o *outcomeSeries) snapshot() (map[string]int64, []SeriesPoint) {
	end := o.now().Truncate(seriesBucket)
	o.mu.Lock()
	defer o.mu.Unlock()
	totals := map[string]int64{}
	for _, oc := range seqboxtype.Outcomes() {
		totals[string(oc)] = o.totals[oc]
	}
	byStart := map[time.Time]bucket{}
	for _, b := range o.buckets {
		byStart[b.start] = b
	}
	points := make([]SeriesPoint, 0, seriesLen)
	for i := seriesLen - 1; i >= 0; i-- {
		start := end.Add(-time.Duration(i) * seriesBucket)
		if !start.Add(seriesBucket).After(o.since) {
			continue
		}
		p := SeriesPoint{Start: start, Counts: map[string]int64{}}
		if b, ok := byStart[start]; ok {
			for oc, n := range b.counts {
				p.Counts[string(oc)] = n
			}
		}
		points = append(points, p)
	}
	return totals, points
}

// total is how many results with outcome oc were committed since the
// server started.
func (o *outcomeSeries) total(oc seqboxtype.Outcome) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.totals[oc]
}
