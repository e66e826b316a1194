package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/bench"
	"github.com/spf13/cobra"
)

// prefillDefaults are `bench prefill`'s defaults, which `bench --prefill
// N` runs with.
func prefillDefaults() bench.PrefillOptions {
	return bench.PrefillOptions{Rows: 10_000_000, Messages: 20000, Duration: 5 * time.Second, Workers: 4,
		Batch: seqbox.DefaultBatchSize, Keys: 100, PurgeBatch: seqbox.DefaultPurgeBatch}
}

// quickPrefill is o sized as `bench --prefill N --quick` runs it: a
// tenth of the messages and a second at a fixed rate for each inbox.
func quickPrefill(o bench.PrefillOptions) bench.PrefillOptions {
	o.Messages, o.Duration = 2000, time.Second
	return o
}

const prefillLong = "The cost of the inbox's size: seqbox keeps every identity for its retention (30 days at\n" +
	"100 events/s is 260 million rows). On one database, with the same consumer settings throughout, it measures the\n" +
	"core (embedded queue, inbox, gate, record handler, COMMIT, ack) on the inbox as it is (empty on the default\n" +
	"temporary SQLite file): its rate with --messages queued beforehand, and its p99 from receive to commit over\n" +
	"--seconds at a fixed rate, half that. It then seeds --rows live identities in bulk (multi-row INSERTs generated\n" +
	"in the database, 100,000 a transaction on PostgreSQL, 1,000,000 on SQLite through a connection with a 2 GiB page\n" +
	"cache: 16 sources, UUID-shaped ids in random order, retention ending over the\n" +
	"next 30 days) and 100 held and 100 blocked ones already expired, and measures the core again, at the same fixed\n" +
	"rate. Last, the retention purge as `seqbox purge` runs it, alone, at a clock 15 days ahead: it removes the\n" +
	"oldest half of the seeded identities, and its rate is set against the core's on the full inbox (ingest).\n" +
	"It checks that every message was applied exactly once and that the purge removed exactly the expired\n" +
	"identities, keeping the newer half and the held and blocked ones. The last line:\n" +
	"prefill: store=… rows=… empty_msgs_per_s=… empty_p99_ms=… full_msgs_per_s=… full_p99_ms=… rate_vs_empty=…\n" +
	"p99_vs_empty=… purge_rows_per_s=… ingest_msgs_per_s=… purge_vs_ingest=… check=ok(…)\n" +
	"Progress goes to stderr: a line as each phase ends and at every tenth of a long seed, and on a terminal the\n" +
	"step that runs. A seed of 10 million rows takes minutes; the database keeps the seeded rows that are not\n" +
	"purged (a --db of your own grows by --rows/2 each run)."

func benchPrefillCmd() *cobra.Command {
	o := prefillDefaults()
	seconds := o.Duration.Seconds()
	c := &cobra.Command{
		Use:   "prefill [--db URL] [--rows N]",
		Short: "The core on the empty inbox and on one pre-filled with --rows live identities; the retention purge's rate against the ingest's",
		Long:  prefillLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkCounts("bench prefill", countFlag{"rows", o.Rows, 0}, countFlag{"messages", o.Messages, maxBenchMessages},
				countFlag{"workers", o.Workers, 0}, countFlag{"batch", o.Batch, 0}, countFlag{"keys", o.Keys, 0},
				countFlag{"purge-batch", o.PurgeBatch, 0}); err != nil {
				return err
			}
			if !(seconds > 0 && seconds <= 3600) {
				return fmt.Errorf("bench prefill: --seconds %g: must be more than 0 and at most 3600", seconds)
			}
			o.Duration = time.Duration(seconds * float64(time.Second))
			if o.CPUProfile != "" {
				// Its files are made after the empty inbox's run: a
				// directory that is not there is said before anything runs.
				if st, err := os.Stat(filepath.Dir(o.CPUProfile)); err != nil || !st.IsDir() {
					return fmt.Errorf("bench prefill: --cpuprofile %s: no directory %s for its files", o.CPUProfile, filepath.Dir(o.CPUProfile))
				}
			}
			return runPrefill(cmd, o)
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.DB, "db", "", "SQLite file or postgres:// URL (default: a temporary SQLite file)")
	fl.IntVar(&o.Rows, "rows", o.Rows, "live identities to seed before the second measurement")
	fl.IntVar(&o.Messages, "messages", o.Messages, "messages of each saturated run (a tenth more warm the consumer up)")
	fl.Float64Var(&seconds, "seconds", seconds, "how long each fixed-rate run is measured, after a second of warm-up")
	fl.IntVar(&o.Workers, "workers", o.Workers, "the consumer's Workers")
	fl.IntVar(&o.Batch, "batch", o.Batch, "the consumer's BatchSize")
	fl.IntVar(&o.Keys, "keys", o.Keys, "partition keys each measured stream spreads over")
	fl.IntVar(&o.PurgeBatch, "purge-batch", o.PurgeBatch, "identities per purge transaction")
	fl.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of each saturated run to PREFIX-empty.pprof and PREFIX-full.pprof (go tool pprof)")
	return c
}

// runPrefill runs bench.Prefill on o.DB (default a temporary SQLite
// file), with its progress on stderr.
func runPrefill(cmd *cobra.Command, o bench.PrefillOptions) error {
	return withProgress(cmd, o.DB, func(db string, onPhase func(bench.Phase)) error {
		o.DB, o.OnPhase = db, onPhase
		if _, err := bench.Prefill(cmd.Context(), o, cmd.OutOrStdout()); err != nil {
			return fmt.Errorf("bench prefill: %w", err)
		}
		return nil
	})
}
