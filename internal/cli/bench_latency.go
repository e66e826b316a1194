package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/bench"
)

func benchLatencyCmd() *cobra.Command {
	o := bench.LatencyOptions{Keys: 100, Workers: 4, Batch: seqbox.DefaultBatchSize}
	var seconds float64
	c := &cobra.Command{
		Use:   "latency --rate N",
		Short: "p50 and p99 from receive to commit while a feed publishes at a fixed rate",
		Long: "Publishes to the embedded queue at --rate messages per second (every 10 ms, the messages due,\n" +
			"in one transaction) while seqbox consumes it (the record handler, as in bench), and after a second\n" +
			"of warm-up measures for --seconds: a line per run with the rate applied, p50, p99 and the maximum\n" +
			"from receive to commit, and p50 and p99 from publish to commit (publish_p50_ms, publish_p99_ms: the\n" +
			"wait in the queue included). A run fails unless every message published was applied once and the\n" +
			"queue is empty at its end.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkCounts("bench latency", countFlag{"rate", o.Rate, 0}, countFlag{"runs", o.Runs, 0}, countFlag{"keys", o.Keys, 0},
				countFlag{"workers", o.Workers, 0}, countFlag{"batch", o.Batch, 0}); err != nil {
				return err
			}
			if !(seconds > 0 && seconds <= 3600) {
				return fmt.Errorf("bench latency: --seconds %g: must be more than 0 and at most 3600", seconds)
			}
			o.Duration = time.Duration(seconds * float64(time.Second))
			db, cleanup, err := benchDB(o.DB)
			if err != nil {
				return err
			}
			defer cleanup()
			o.DB = db
			return bench.LatencyRuns(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.DB, "db", "", "SQLite file or postgres:// URL (default: a temporary SQLite file)")
	fl.IntVar(&o.Rate, "rate", 0, "messages per second to publish (required)")
	fl.Float64Var(&seconds, "seconds", 4, "how long each run is measured, after a second of warm-up")
	fl.IntVar(&o.Runs, "runs", 1, "runs, one after the other on one database")
	fl.IntVar(&o.Keys, "keys", o.Keys, "partition keys the messages spread over")
	fl.IntVar(&o.Workers, "workers", o.Workers, "the consumer's Workers")
	fl.IntVar(&o.Batch, "batch", o.Batch, "the consumer's BatchSize")
	fl.BoolVar(&o.BatchHandler, "batch-handler", false, "run the record handler as a BatchHandler")
	return c
}
