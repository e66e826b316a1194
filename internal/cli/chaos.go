package cli

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/chaos"
	"github.com/spf13/cobra"
)

func chaosCmd(ed Edition) *cobra.Command {
	opt := chaos.Options{StartBroker: ed.StartBroker}
	var scenarios, procLog, target, agentCmd string
	var verbose bool
	c := &cobra.Command{
		Use:   "chaos",
		Short: "SIGKILL competing consumer processes at every failure window and check nothing was lost or applied twice",
		Long: `chaos generates a workload with duplicates, collisions, semantic duplicates,
reorderings, late versions, poison and flaky messages, runs the consumer as
separate OS processes (two competing), kills them with SIGKILL at random and at
each named fault point, restarts them, and checks the database against an
oracle, and each key's history of applies against the sequential
specification of a key (the history column). One row per scenario, printed
as it ends; on a terminal, a progress line on stderr while it runs. Exit
status 1 if any failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			opt.Self = self
			if scenarios != "" {
				opt.Scenarios = strings.Split(scenarios, ",")
			}
			if opt.PGData == "" {
				opt.PGData = os.Getenv("SEQBOX_TEST_POSTGRES_DATA")
			}
			if opt.PGBin == "" {
				opt.PGBin = os.Getenv("SEQBOX_TEST_POSTGRES_BIN")
			}
			// On a terminal, a progress line on stderr, cleared before
			// each row and each --verbose line.
			prog := &progress{w: cmd.ErrOrStderr(), terminal: isTerminal(cmd.ErrOrStderr())}
			opt.OnProgress = func(p chaos.Progress) { prog.show(chaosProgress(p)) }
			if verbose {
				opt.Progress = prog
			}
			if procLog != "" {
				f, err := os.Create(procLog)
				if err != nil {
					return err
				}
				defer f.Close()
				opt.ProcLog = f
			}
			// Refused before the table's header: a run with these
			// options would print a header and no row.
			switch {
			case opt.Procs < 1:
				return fmt.Errorf("chaos: --procs %d: at least 1", opt.Procs)
			case opt.Lease <= 0:
				return fmt.Errorf("chaos: --lease %s: must be positive", opt.Lease)
			case opt.Timeout <= 0:
				return fmt.Errorf("chaos: --timeout %s: must be positive", opt.Timeout)
			case agentCmd != "" && opt.AgentName == "":
				return fmt.Errorf("chaos: --agent-cmd needs --agent (the SDK agent it replaces)")
			}
			if err := opt.Check(); err != nil {
				return err
			}
			start := time.Now()
			run := chaos.Run
			if target == "serve" {
				run = chaos.RunServe
			}
			if opt.AgentName != "" {
				run = chaos.RunServeAgent
			}
			// Each scenario's row prints when it ends; a small run takes
			// minutes.
			chaos.WriteHeader(cmd.OutOrStdout())
			opt.OnResult = func(r chaos.Result) {
				prog.clear()
				chaos.WriteRow(cmd.OutOrStdout(), r)
			}
			res, err := run(cmd.Context(), opt)
			prog.clear()
			failed := chaos.WriteSummary(cmd.OutOrStdout(), res)
			if slices.ContainsFunc(res, func(r chaos.Result) bool { return r.Kills != opt.Kills }) {
				fmt.Fprintf(cmd.OutOrStdout(), "kills: the SIGKILLs each scenario saw; --kills %d is a budget, not a count. "+
					"random scenarios deal it at intervals while consumers run; a fault:* scenario arms each consumer to kill itself "+
					"at the fault point while the budget lasts, so consumers armed at once can pass it, and a point the run "+
					"never reaches leaves it unspent\n", opt.Kills)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "elapsed %s\n", time.Since(start).Round(time.Millisecond))
			if err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("chaos: %d scenarios failed", failed)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.IntVar(&opt.Messages, "messages", 2000, "logical messages in the workload")
	fl.IntVar(&opt.Keys, "keys", 50, "business keys (partition keys)")
	fl.IntVar(&opt.Kills, "kills", 10, "SIGKILLs per scenario")
	fl.StringVar(&opt.DB, "db", "", "postgres:// URL (a schema per scenario) or a directory for SQLite files (default: temp)")
	fl.StringVar(&scenarios, "scenarios", "", "comma-separated scenarios (default: all for the store)")
	fl.IntVar(&opt.Procs, "procs", 2, "competing consumer processes")
	fl.Uint64Var(&opt.Seed, "seed", 1, "workload seed")
	fl.DurationVar(&opt.Lease, "lease", time.Second, "queue lease (visibility timeout)")
	fl.DurationVar(&opt.Timeout, "timeout", 15*time.Minute, "time limit per scenario")
	fl.DurationVar(&opt.Stall, "stall", 2*time.Minute, "fail a phase whose pending count has not moved for this long, saying who holds what (negative: never)")
	fl.StringVar(&opt.PGData, "pg-data", "", "PostgreSQL data directory, for pg-restart")
	fl.StringVar(&opt.PGBin, "pg-bin", "", "PostgreSQL bin directory, for pg-restart")
	fl.BoolVarP(&verbose, "verbose", "v", false, "print progress to stderr")
	fl.StringVar(&procLog, "proc-log", "", "write the consumer processes' output to this file, for a post-mortem")
	fl.BoolVar(&opt.Keep, "keep", false, "keep each scenario's SQLite files for a post-mortem")
	where := "a broker transport needs --broker; seqbox-lab runs the brokers in process"
	if ed.StartBroker != nil {
		where = "brokers run in process on loopback unless --broker is given"
	}
	fl.StringVar(&opt.Transport, "transport", "embedded", "transport under test: "+strings.Join(chaos.Transports, ", ")+" ("+where+")")
	fl.StringVar(&opt.BrokerAddr, "broker", "", "a running broker to test against: a nats:// URL, Kafka seed brokers host:port,..., or an SQS endpoint URL")
	fl.StringVar(&target, "target", "consumer", "consumer: consumer processes over a transport; serve: two seqbox serve processes, a faulty agent and producers over HTTP (scenarios: "+strings.Join(chaos.ServeScenarios(), ", ")+")")
	fl.StringVar(&opt.AgentName, "agent", "", "with --target serve: run an SDK's example agent as its own process instead of the harness's faulty agent ("+
		strings.Join(slices.Sorted(maps.Keys(chaos.SDKAgents)), ", ")+"), SIGKILLed at random and right after a tool call; the oracle adds one model call per (event, step) and one remote effect per (event, action)")
	fl.StringVar(&agentCmd, "agent-cmd", "", "with --agent: the agent's command instead of the SDK's, its {listen}, {gateways} and {remote} filled in (space-separated)")
	c.PreRunE = func(*cobra.Command, []string) error {
		if target != "consumer" && target != "serve" {
			return fmt.Errorf("--target %q: not consumer or serve", target)
		}
		if opt.AgentName != "" {
			if target != "serve" {
				return fmt.Errorf("--agent %s: only with --target serve", opt.AgentName)
			}
			opt.AgentCmd = chaos.SDKAgents[opt.AgentName]
			if agentCmd != "" {
				opt.AgentCmd = strings.Fields(agentCmd)
			}
			if len(opt.AgentCmd) == 0 {
				return fmt.Errorf("--agent %q: not one of %s (or give --agent-cmd)", opt.AgentName, strings.Join(slices.Sorted(maps.Keys(chaos.SDKAgents)), ", "))
			}
		}
		if !slices.Contains(chaos.Transports, opt.Transport) {
			return fmt.Errorf("--transport %q: not one of %s", opt.Transport, strings.Join(chaos.Transports, ", "))
		}
		if target == "consumer" {
			return opt.CheckBroker()
		}
		return nil
	}
	c.AddCommand(chaosWorkerCmd(ed))
	return c
}

func chaosWorkerCmd(ed Edition) *cobra.Command {
	opt := chaos.WorkerOptions{Transports: ed.WorkerTransports}
	c := &cobra.Command{
		Use:    "worker",
		Short:  "One chaos process (started by chaos)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return chaos.RunWorker(cmd.Context(), opt)
		},
	}
	fl := c.Flags()
	fl.StringVar(&opt.DB, "db", "", "store and queue: a SQLite file path or a postgres:// URL")
	fl.StringVar(&opt.Mode, "mode", "consume", "consume, redrive, purge, checkpoint or relay")
	fl.DurationVar(&opt.Lease, "lease", time.Second, "queue lease")
	fl.IntVar(&opt.Workers, "workers", 2, "consumer workers")
	fl.IntVar(&opt.Batch, "batch", 32, "batch size")
	fl.DurationVar(&opt.NowOffset, "now-offset", 0, "shift the clock")
	fl.BoolVar(&opt.Slow, "slow", false, "slow handler calls now and then")
	fl.StringVar(&opt.Queue, "queue", "default", "embedded queue name (consume mode)")
	fl.DurationVar(&opt.DiskFullFor, "disk-full-for", 0, "fill the disk (RLIMIT_FSIZE) for this long at the start")
	fl.StringVar(&opt.Transport, "transport", "embedded", "what consume mode receives from")
	fl.StringVar(&opt.Broker, "broker", "", "the broker's address (nats URL, kafka brokers)")
	fl.StringVar(&opt.Topic, "topic", "", "the scenario's stream or topic")
	fl.StringVar(&opt.Name, "name", "", "the consumer's name (default: the chaos consumer)")
	fl.BoolVar(&opt.Emit, "emit", false, "emit one downstream event per applied message through the outbox")
	fl.StringVar(&opt.Remote, "remote", "", "the agent-ledger scenario's remote API: Decide creates each effect there through the ledger")
	return c
}
