package bench

import (
	"fmt"
	"slices"
	"time"
)

// Latency summarises a set of per-message latencies.
type Latency struct {
	// N is the number of samples; the rest are zero when it is.
	N             int
	P50, P99, Max time.Duration
}

// LatencyOf computes the nearest-rank percentiles of ds (which it sorts).
func LatencyOf(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	return Latency{N: len(ds), P50: rank(ds, 0.50), P99: rank(ds, 0.99), Max: ds[len(ds)-1]}
}

// rank is the nearest-rank percentile p of sorted ds.
func rank(ds []time.Duration, p float64) time.Duration {
	i := int(float64(len(ds))*p+0.999999) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

// ms prints a duration in milliseconds, or "-" when there is no sample.
func ms(d time.Duration, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond))
}

// rate is n per second over d (0 for an empty interval).
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
