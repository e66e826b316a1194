package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// LatencyOptions configure `seqbox bench latency`.
type LatencyOptions struct {
	// DB is a SQLite path or a postgres:// URL.
	DB string
	// Rate is the messages per second the feed publishes.
	Rate int
	// Duration is how long each run is measured, after a second of
	// warm-up.
	Duration time.Duration
	// Runs is how many runs, one after the other on one database.
	Runs int
	// Keys, Workers and Batch are the stream's partition keys and the
	// consumer's Workers and BatchSize.
	Keys, Workers, Batch int
	// BatchHandler runs the record handler as a BatchHandler.
	BatchHandler bool
}

// LatencyRuns feeds the embedded queue at o.Rate while seqbox consumes it, as
// the latency phases of Summary do, o.Runs times, and prints a line per
// run: the rate applied, p50, p99 and the maximum from receive to commit,
// and p50 and p99 from publish to commit (the wait in the queue
// included). Each run fails unless every message published was applied
// exactly once and the queue drained.
func LatencyRuns(ctx context.Context, o LatencyOptions, w io.Writer) error {
	run := newRun()
	e, err := open(ctx, o.DB, "bench-"+run)
	if err != nil {
		return err
	}
	defer e.close()
	e.bulk = o.BatchHandler
	handler := "Handler"
	if o.BatchHandler {
		handler = "BatchHandler"
	}
	fmt.Fprintf(w, "seqbox bench latency  db=%s rate=%d seconds=%g runs=%d keys=%d workers=%d batch=%d handler=%s\n",
		e.where, o.Rate, o.Duration.Seconds(), o.Runs, o.Keys, o.Workers, o.Batch, handler)
	for i := range o.Runs {
		r, err := atRate(ctx, e, fmt.Sprintf("%sl%d", run, i), o.Rate, o.Keys, o.Workers, o.Batch, o.Duration)
		if err != nil {
			return fmt.Errorf("bench latency: run %d: %w", i+1, err)
		}
		lat, e2e := r.lat, r.e2e
		fmt.Fprintf(w, "latency: run=%d target=%d msgs_per_s=%.0f p50_ms=%s p99_ms=%s max_ms=%s messages=%d publish_p50_ms=%s publish_p99_ms=%s\n",
			i+1, o.Rate, r.got, ms(lat.P50, lat.N), ms(lat.P99, lat.N), ms(lat.Max, lat.N), lat.N, ms(e2e.P50, e2e.N), ms(e2e.P99, e2e.N))
	}
	return nil
}
