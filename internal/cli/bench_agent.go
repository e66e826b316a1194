package cli

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/seqbox/seqbox/internal/bench"
	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/serve"
	"github.com/spf13/cobra"
)

func benchAgentCmd() *cobra.Command {
	var o bench.AgentOptions
	var cpuProfile string
	var timeline bool
	c := &cobra.Command{
		Use:   "agent",
		Short: "The agent path (seqbox serve's pipeline, or Config.Decide with effects.Ledger) against an agent in this process, beside the core",
		Long: "Runs, on one database: the core (embedded queue, per-message Handler) for core_per_s; then --keys x --versions\n" +
			"events through --target to an agent in this process that answers after --latency, with --concurrency calls\n" +
			"in flight at most; then a chain of --chain events on one key with an instant agent (chain_p50_ms and\n" +
			"chain_p99_ms: the time from one event's call to the next's). It checks that the agent got every event\n" +
			"once, each key's in version order, and prints one line (post_batch: the events of one POST to serve, --post-batch;\n" +
			"1 posts each event alone, more posts CloudEvents batches; - for the library, which publishes a round in one batch):\n" +
			"agent: store=… target=… keys=… latency_ms=… concurrency=… events_per_s=… ideal_per_s=… efficiency=…\n" +
			"core_per_s=… ratio_vs_core=… chain_p50_ms=… chain_p99_ms=… busy_errors=… attempts_on_contention=… check=… versions=… post_batch=…\n" +
			"With --timeline, a second line says where the --keys x --versions run's time went beyond the agent's latency,\n" +
			"from the agent's answers: how late each key's first answer came after the start, each later step (one\n" +
			"answer of a key to its next: p50 and max, per step), and the tail from the last answer to the last event applied:\n" +
			"agent timeline: first_p50_ms=… first_max_ms=… steps_p50_ms=… steps_max_ms=… tail_ms=…\n" +
			"With --statements N (SQLite), where SQLite's one writer spent the core's run and the agent run: for each, a line\n" +
			"agent statements: run=core|agent units=… statements=… total_ms=… per_unit_ms=… commits=… commit_ms=…\n" +
			"and the N statements longest in all, with their count, how many times SQLite compiled them, time in all and a run's average.\n" +
			"With --work, what the core's run and the agent run cost the database, in counts the machine's speed does not move:\n" +
			"agent work: run=core|agent units=… commits_per_unit=… statements_per_unit=… blocks_per_unit=… wal_bytes_per_unit=… write_bytes_per_unit=…\n" +
			"(commits: on SQLite the COMMITs of its writer pools' transactions, not its writes outside one, which --pages\n" +
			"counts; on PostgreSQL 13 or later the transaction ids the server gave out, to any database, every write\n" +
			"transaction; statements and blocks on PostgreSQL only with pg_stat_statements in the database; WAL bytes on\n" +
			"PostgreSQL, cluster-wide; bytes written by this process on SQLite, from Linux's /proc/self/io, where the file\n" +
			"has a device under it (not tmpfs); - where the store does not say).\n" +
			"With --pages N (SQLite), where the core's run's and the agent run's writes went: their commits' WAL frames (each a\n" +
			"page of a table or an index written again; SQLite's automatic checkpoints are held during the runs so that the WAL\n" +
			"keeps them all), for each a line\n" +
			"agent pages: run=core|agent units=… frames=… frames_per_unit=… commits_per_unit=…\n" +
			"and the N tables and indexes that took most frames. The database must be one only this run writes; the WAL\n" +
			"grows with the runs, and the rates of the first line are not those of a run without --pages (with --work too,\n" +
			"the bytes written leave out the checkpoints' copies).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkCounts("bench agent", countFlag{"keys", o.Keys, maxAgentEvents}, countFlag{"versions", o.Versions, maxAgentEvents},
				countFlag{"concurrency", o.Concurrency, 0}, countFlag{"chain", o.Chain, maxAgentChain},
				countFlag{"core-messages", o.CoreMessages, maxBenchMessages}, countFlag{"post-batch", o.PostBatch, 0}); err != nil {
				return err
			}
			if o.Keys*o.Versions > maxAgentEvents {
				return fmt.Errorf("bench agent: --keys %d x --versions %d: at most %d events (a run holds them in memory)", o.Keys, o.Versions, maxAgentEvents)
			}
			if o.Latency < 0 {
				return fmt.Errorf("bench agent: --latency %s: must not be negative", o.Latency)
			}
			if o.Target != "serve" && o.Target != "library" {
				return fmt.Errorf("bench agent: --target %q: want serve or library", o.Target)
			}
			if o.PostBatch > 1 && o.Target != "serve" {
				return fmt.Errorf("bench agent: --post-batch %d: --target serve only (the library publishes a round's events in one batch)", o.PostBatch)
			}
			if o.PostBatch > serve.DefaultMaxBatch {
				return fmt.Errorf("bench agent: --post-batch %d: at most %d, seqbox serve's --max-batch", o.PostBatch, serve.DefaultMaxBatch)
			}
			if o.Statements < 0 {
				return fmt.Errorf("bench agent: --statements %d: must not be negative", o.Statements)
			}
			if o.Statements > 0 && o.Work {
				return fmt.Errorf("bench agent: --statements and --work: one at a time (--work counts what --statements times)")
			}
			if o.Pages < 0 {
				return fmt.Errorf("bench agent: --pages %d: must not be negative", o.Pages)
			}
			if o.Pages > 0 && pgdb.IsURL(o.DB) {
				return fmt.Errorf("bench agent: --pages: SQLite only (on PostgreSQL, --work gives the WAL's bytes)")
			}
			if o.Statements > 0 && pgdb.IsURL(o.DB) {
				return fmt.Errorf("bench agent: --statements: SQLite only (on PostgreSQL, pg_stat_statements tells the same)")
			}
			db, cleanup, err := benchDB(o.DB)
			if err != nil {
				return err
			}
			defer cleanup()
			o.DB = db
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("bench agent: --cpuprofile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("bench agent: --cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			res, err := bench.Agent(cmd.Context(), o)
			if err != nil {
				return fmt.Errorf("bench agent: %w", err)
			}
			store := "sqlite"
			if pgdb.IsURL(db) {
				store = "postgres"
			}
			lines := []string{res.Line(o, store)}
			if timeline {
				lines = append(lines, res.Timeline.Line())
			}
			if o.Statements > 0 {
				lines = append(lines, bench.StatementLines("core", o.CoreMessages, res.CoreStatements, o.Statements)...)
				lines = append(lines, bench.StatementLines("agent", res.Events, res.AgentStatements, o.Statements)...)
			}
			if o.Work {
				lines = append(lines, res.CoreWork.Line("core"), res.AgentWork.Line("agent"))
			}
			if o.Pages > 0 {
				lines = append(lines, res.CorePages.Lines("core", o.Pages)...)
				lines = append(lines, res.Pages.Lines("agent", o.Pages)...)
			}
			for _, l := range lines {
				if _, err := fmt.Fprintln(cmd.OutOrStdout(), l); err != nil {
					return err
				}
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.DB, "db", "", "SQLite file or postgres:// URL (default: a temporary SQLite file)")
	fl.StringVar(&o.Target, "target", "serve", "serve (the gateway's pipeline over loopback HTTP) or library (Config.Decide + effects.Ledger)")
	fl.IntVar(&o.Keys, "keys", 200, "partition keys")
	fl.IntVar(&o.Versions, "versions", 5, "events per key, versions 1..N")
	fl.DurationVar(&o.Latency, "latency", 0, "how long the agent takes to answer")
	fl.IntVar(&o.Concurrency, "concurrency", 64, "agent calls in flight at most (--agent-concurrency, Config.DecideConcurrency)")
	fl.IntVar(&o.Chain, "chain", 20, "events of the one-key chain (instant agent)")
	fl.IntVar(&o.PostBatch, "post-batch", 1, "events of one POST to seqbox serve (--target serve): 1 posts each alone, more posts CloudEvents batches of that many")
	fl.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	fl.IntVar(&o.CoreMessages, "core-messages", 5000, "messages of the core's run (core_per_s)")
	fl.BoolVar(&timeline, "timeline", false, "print a second line: where the run's time went beyond the agent's latency")
	fl.IntVar(&o.Statements, "statements", 0, "print the N statements SQLite's writer spent longest on, in the core's run and the agent run (SQLite only)")
	fl.IntVar(&o.Pages, "pages", 0, "print the N tables and indexes the core's run's and the agent run's WAL frames went to most (SQLite only)")
	fl.BoolVar(&o.Work, "work", false, "print what the core's run and the agent run cost the database, per message or event: commits, statements, blocks and WAL bytes (PostgreSQL), bytes written (SQLite)")
	return c
}
