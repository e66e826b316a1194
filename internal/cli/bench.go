package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seqbox/seqbox/internal/bench"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/spf13/cobra"
)

func benchCmd() *cobra.Command {
	var o bench.SummaryOptions
	var prefill int
	c := &cobra.Command{
		Use:   "bench [--quick] [--prefill N] [--db URL]",
		Short: "Measure seqbox against the raw limit of its database and the naive design; throughput and purge in detail",
		Long: "Without a subcommand, one run side by side on one database: the raw limit (the rows seqbox writes\n" +
			"per message as plain batched writes, the best over batch sizes and 1-4 writers), seqbox end to end\n" +
			"(embedded queue, inbox, gate, effect, COMMIT, ack) with a per-message Handler and again with a\n" +
			"BatchHandler (the effects as multi-row statements, as the raw limit writes them), and the naive\n" +
			"design (query, effect, marker; one transaction per message), then seqbox (Handler) at 10%, half and\n" +
			"90% of its rate for the p50 and p99 from receive to commit (a feed publishes the messages due every\n" +
			"10 ms in one transaction). Before that table, seqbox end to end\n" +
			"over 1, 100, 10,000 and 1,000,000 keys (the last on key rows created in bulk first) and over a\n" +
			"Zipf(s=1.1) hot-key spread of 10,000 keys, with this process's peak resident set during each (VmHWM)\n" +
			"and what bounds it.\n" +
			"The last line gives the Handler's figures (p99 at half rate):\n" +
			"bench: ratio_vs_raw=X ratio_vs_naive=Y msgs_per_s=Z p99_ms=W\n\n" +
			"bench prints numbers; its subcommands check correctness (every message applied exactly once, the\n" +
			"purge removed exactly the expired identities), never speed. Run it on the database you deploy on.\n\n" +
			"Progress goes to stderr: a line as each phase ends, and on a terminal the step that runs.\n\n" +
			"With --prefill N it runs `seqbox bench prefill --rows N` instead (see its help): the core on the empty\n" +
			"inbox and on one pre-filled with N live identities side by side, and the retention purge against the\n" +
			"ingest; with --quick as well, with 2,000 messages and 1 s at a fixed rate for each inbox.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("prefill") {
				if prefill < 1 {
					return fmt.Errorf("bench: --prefill %d: must be at least 1", prefill)
				}
				po := prefillDefaults()
				if o.Quick {
					po = quickPrefill(po)
				}
				po.DB, po.Rows = o.DB, prefill
				return runPrefill(cmd, po)
			}
			o.Scratch = o.DB == ""
			return withProgress(cmd, o.DB, func(db string, onPhase func(bench.Phase)) error {
				o.DB, o.OnPhase = db, onPhase
				return bench.Summary(cmd.Context(), o, cmd.OutOrStdout())
			})
		},
	}
	c.Flags().BoolVar(&o.Quick, "quick", false, "a smaller run, well under a minute")
	c.Flags().StringVar(&o.DB, "db", "", "SQLite file or postgres:// URL (default: a temporary SQLite file)")
	c.Flags().IntVar(&prefill, "prefill", 0, "instead of the summary, run `bench prefill --rows N` (its other flags at their defaults, or --quick's) on --db")
	c.AddCommand(benchThroughputCmd(), benchPurgeCmd(), benchPrefillCmd())
	c.AddCommand(benchIngestCmd(), benchLatencyCmd(), benchAgentCmd())
	return c
}

// withProgress runs a bench on db (benchDB's) with its progress on
// stderr: each phase's end, and on a terminal its steps as a line
// rewritten in place (a run takes minutes). run gets the database and
// the callback for the bench's OnPhase.
func withProgress(cmd *cobra.Command, db string, run func(db string, onPhase func(bench.Phase)) error) error {
	db, cleanup, err := benchDB(db)
	if err != nil {
		return err
	}
	defer cleanup()
	prog := &progress{w: cmd.ErrOrStderr(), terminal: isTerminal(cmd.ErrOrStderr())}
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		prog.tick(stop)
	}()
	defer func() {
		close(stop)
		<-ticked
		prog.clear()
	}()
	return run(db, prog.onPhase)
}

func benchThroughputCmd() *cobra.Command {
	var o bench.ThroughputOptions
	c := &cobra.Command{
		Use:   "throughput",
		Short: "Raw INSERTs vs Consumer.Run (batched) vs Deliver (one per transaction), side by side",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkCounts("bench throughput", countFlag{"messages", o.Messages, maxBenchMessages}, countFlag{"keys", o.Keys, 0},
				countFlag{"batch", o.Batch, 0}, countFlag{"workers", o.Workers, 0}); err != nil {
				return err
			}
			if o.Deliver < 0 {
				return fmt.Errorf("bench throughput: --deliver-messages %d: must not be negative", o.Deliver)
			}
			db, cleanup, err := benchDB(o.DB)
			if err != nil {
				return err
			}
			defer cleanup()
			o.DB = db
			_, err = bench.Throughput(cmd.Context(), o, cmd.OutOrStdout())
			return err
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.DB, "db", "", "SQLite file or postgres:// URL (default: a temporary SQLite file)")
	fl.IntVar(&o.Messages, "messages", 20000, "messages for the raw limit and for Consumer.Run")
	fl.IntVar(&o.Keys, "keys", 100, "partition keys the messages spread over")
	fl.IntVar(&o.Batch, "batch", 64, "rows per raw transaction and the consumer's BatchSize")
	fl.IntVar(&o.Workers, "workers", 4, "raw writers and the consumer's Workers")
	fl.IntVar(&o.Deliver, "deliver-messages", 0, "messages for Deliver, one per transaction (0: messages/10)")
	return c
}

func benchPurgeCmd() *cobra.Command {
	var o bench.PurgeOptions
	c := &cobra.Command{
		Use:   "purge",
		Short: "Purge expired inbox identities in batches while a consumer applies live traffic",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkCounts("bench purge", countFlag{"rows", o.Rows, 0}, countFlag{"batch", o.Batch, 0}, countFlag{"workers", o.Workers, 0},
				countFlag{"consumer-batch", o.ConsumerBatch, 0}, countFlag{"keys", o.Keys, 0}); err != nil {
				return err
			}
			if o.Baseline <= 0 {
				return fmt.Errorf("bench purge: --baseline %s: must be positive", o.Baseline)
			}
			if o.Warmup < 0 {
				return fmt.Errorf("bench purge: --warmup %s: must not be negative", o.Warmup)
			}
			if o.Rate < 0 {
				return fmt.Errorf("bench purge: --rate %d: must not be negative", o.Rate)
			}
			db, cleanup, err := benchDB(o.DB)
			if err != nil {
				return err
			}
			defer cleanup()
			o.DB = db
			_, err = bench.Purge(cmd.Context(), o, cmd.OutOrStdout())
			return err
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.DB, "db", "", "SQLite file or postgres:// URL (default: a temporary SQLite file)")
	fl.IntVar(&o.Rows, "rows", 1_000_000, "expired inbox identities to seed and purge")
	fl.IntVar(&o.Batch, "batch", 500, "identities per purge transaction")
	fl.IntVar(&o.Workers, "workers", 4, "the live consumer's Workers")
	fl.IntVar(&o.ConsumerBatch, "consumer-batch", 64, "the live consumer's BatchSize")
	fl.IntVar(&o.Keys, "keys", 100, "partition keys the live stream spreads over")
	fl.DurationVar(&o.Warmup, "warmup", 2*time.Second, "how long the consumer runs before the baseline window")
	fl.DurationVar(&o.Baseline, "baseline", 5*time.Second, "how long the consumer is measured before the purge")
	fl.IntVar(&o.Rate, "rate", 0, "live messages per second (0: keep the consumer saturated)")
	return c
}

// benchDB returns the database to measure: db itself, or a fresh
// temporary SQLite file removed by the cleanup.
func benchDB(db string) (string, func(), error) {
	if db != "" {
		return db, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "seqbox-bench-")
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(dir, sqlite.DefaultPath), func() { os.RemoveAll(dir) }, nil
}

func benchIngestCmd() *cobra.Command {
	var o bench.IngestOptions
	c := &cobra.Command{
		Use:   "ingest --url URL",
		Short: "Load a running seqbox serve: events per second and p50/p99 of POST /v1/events (a 202 means committed in the queue)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Token == "" {
				o.Token = os.Getenv("SEQBOX_INGEST_TOKEN")
			}
			res, err := bench.Ingest(cmd.Context(), o)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), res.Line(o))
			return err
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.URL, "url", "", "the gateway's base URL, e.g. http://127.0.0.1:8080 (required)")
	fl.IntVar(&o.Clients, "clients", 16, "clients posting at once")
	fl.IntVar(&o.Batch, "batch", 1, "events per request (more than 1: batch mode)")
	fl.DurationVar(&o.Duration, "duration", 5*time.Second, "how long to post")
	fl.StringVar(&o.Token, "ingest-token", "", "the gateway's ingest token (default $SEQBOX_INGEST_TOKEN)")
	return c
}
