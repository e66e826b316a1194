package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/transport/embedded"
)

// Options configure a chaos run.
type Options struct {
	Messages, Keys, Kills int
	// DB is empty (a temporary SQLite file per scenario), a SQLite
	// directory prefix, or a postgres:// URL (a fresh schema per scenario).
	DB string
	// Procs is how many consumer processes compete. Default 2.
	Procs int
	Seed  uint64
	Lease time.Duration
	// Scenarios to run; empty means every one that applies to the store.
	Scenarios []string
	// Self is the binary (seqbox or seqbox-lab) that runs `chaos worker`.
	Self string
	// PGData and PGBin locate the PostgreSQL cluster for pg-restart.
	PGData, PGBin string
	// Timeout bounds each scenario.
	Timeout time.Duration
	// Stall fails a phase whose pending count has not moved for this
	// long, saying who holds what (for brokers that can tell). Default
	// 2 minutes; negative: never.
	Stall time.Duration
	// ProcLog receives the processes' output (nil: discarded).
	ProcLog io.Writer
	// Progress receives one line per phase (nil: discarded).
	Progress io.Writer
	// OnResult, when set, is called with each scenario's result as the
	// scenario ends, so that a caller can print its row at once.
	OnResult func(Result)
	// OnProgress, when set, is called while a scenario waits for its
	// messages to settle, at every poll (a few times a second): for a
	// progress line, which the caller throttles.
	OnProgress func(Progress)
	// Keep leaves each scenario's SQLite files in place, for a post-mortem.
	Keep bool
	// Transport is what the consumers receive from: embedded (default),
	// nats, kafka, sqs or pubsub.
	Transport string
	// BrokerAddr is the address of the running broker a broker
	// transport's run consumes from (see Endpoint.Addr); empty: the one
	// StartBroker starts.
	BrokerAddr string
	// StartBroker, when set, starts a broker transport's broker if no
	// BrokerAddr is given (seqbox-lab's in-process emulators).
	StartBroker BrokerStarter
	// AgentName and AgentCmd are the SDK agent of RunServeAgent: its
	// name (the scenario is "agent:NAME") and its command (SDKAgents).
	AgentName string
	AgentCmd  []string
}

// Check refuses options no run can take, naming the flag: too few
// messages or keys, a negative kill budget, process count, lease or
// timeout (zero means the default), and a DB that is neither a
// postgres:// URL nor a directory for the scenarios' SQLite files.
func (opt Options) Check() error {
	switch {
	case opt.Messages < 10:
		return fmt.Errorf("chaos: --messages %d: at least 10", opt.Messages)
	case opt.Keys < 1:
		return fmt.Errorf("chaos: --keys %d: at least 1", opt.Keys)
	case opt.Kills < 0:
		return fmt.Errorf("chaos: --kills %d: must not be negative", opt.Kills)
	case opt.Procs < 0:
		return fmt.Errorf("chaos: --procs %d: at least 1", opt.Procs)
	case opt.Lease < 0:
		return fmt.Errorf("chaos: --lease %s: must be positive", opt.Lease)
	case opt.Timeout < 0:
		return fmt.Errorf("chaos: --timeout %s: must be positive", opt.Timeout)
	}
	if opt.DB != "" && !pgdb.IsURL(opt.DB) {
		if st, err := os.Stat(opt.DB); err != nil || !st.IsDir() {
			return fmt.Errorf("chaos: --db %s: want a postgres:// URL or a directory for the scenarios' SQLite files", opt.DB)
		}
	}
	return nil
}

// Progress is where a running scenario stands.
type Progress struct {
	Scenario string
	// Index is the scenario's place among Total, from 1.
	Index, Total int
	// Phase is the part of the scenario that waits (phase 1, redrive
	// drain, phase 2 for the consumer target; drain for serve).
	Phase string
	// Pending is how many messages wait to be settled.
	Pending int
	// Kills is the SIGKILLs so far in this scenario; -1 when not known
	// where the progress is taken.
	Kills int
	// Elapsed is the scenario's time so far.
	Elapsed time.Duration
}

// consumerFaults are the fault points inside the consumer process.
var consumerFaults = []fault.Point{fault.BeforeTx, fault.AfterInboxInsert, fault.AfterHandler,
	fault.BeforeCommit, fault.AfterCommit, fault.MidBatch, fault.DuringLeaseExtend}

// Scenarios lists the scenario names that apply to a store and a
// transport; broker-node-kill needs a broker whose nodes the harness runs
// (a NodeKiller).
func Scenarios(postgres bool, transport string) []string {
	s := []string{"random", chainScenario, ledgerScenario}
	if transport == "nats" {
		s = append(s, nodeKillScenario)
	}
	for _, f := range consumerFaults {
		s = append(s, "fault:"+string(f))
	}
	s = append(s, "fault:"+string(fault.DuringRedrive), "fault:"+string(fault.DuringPurge))
	if postgres {
		return append(s, "pg-restart")
	}
	return append(s, "sqlite-checkpoint", "sqlite-disk-full")
}

type harness struct {
	opt Options
	// index and total place the running scenario; started is when it
	// started (for Progress).
	index, total int
	started      time.Time
	wl           Workload
	r            *rand.Rand
	broker       Broker // nil for the embedded transport
}

// scenarios lists the scenario names that apply to the run's store and
// broker.
func scenarios(postgres bool, transport string, b Broker) []string {
	all := Scenarios(postgres, transport)
	if _, ok := b.(NodeKiller); ok {
		return all
	}
	return slices.DeleteFunc(all, func(s string) bool { return s == nodeKillScenario })
}

// nodeKillScenario stops a broker node mid-run.
const nodeKillScenario = "broker-node-kill"

// Run runs the scenarios and returns one result each.
func Run(ctx context.Context, opt Options) ([]Result, error) {
	if opt.Procs <= 0 {
		opt.Procs = 2
	}
	if opt.Lease <= 0 {
		opt.Lease = time.Second
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 15 * time.Minute
	}
	if opt.Stall == 0 {
		opt.Stall = 2 * time.Minute
	}
	if opt.ProcLog == nil {
		opt.ProcLog = io.Discard
	}
	if opt.Progress == nil {
		opt.Progress = io.Discard
	}
	if err := opt.Check(); err != nil {
		return nil, err
	}
	pg := pgdb.IsURL(opt.DB)
	if opt.Transport == "" {
		opt.Transport = "embedded"
	}
	if !slices.Contains(Transports, opt.Transport) {
		return nil, fmt.Errorf("chaos: --transport %q: not one of %s", opt.Transport, strings.Join(Transports, ", "))
	}
	b, err := broker(ctx, opt)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	if b != nil {
		defer b.Close()
	}
	have := scenarios(pg, opt.Transport, b)
	names := opt.Scenarios
	if len(names) == 0 {
		names = have
	}
	h := &harness{opt: opt, wl: Generate(opt.Seed, opt.Messages, opt.Keys), r: rand.New(rand.NewPCG(opt.Seed, 99)), broker: b}
	var out []Result
	h.total = len(names)
	for i, name := range names {
		h.index, h.started = i+1, time.Now()
		if !slices.Contains(have, name) {
			why := "this store and transport"
			if name == nodeKillScenario && opt.Transport == "nats" {
				why = "a broker the harness did not start (seqbox-lab runs one whose nodes it can stop)"
			}
			return out, fmt.Errorf("chaos: unknown scenario %q for %s (have %s)", name, why, strings.Join(have, ", "))
		}
		sctx, cancel := context.WithTimeout(ctx, opt.Timeout)
		res := h.scenario(sctx, name)
		cancel()
		if r, ok := b.(Reporter); ok {
			h.progress("%s: %s", name, r.Report())
		}
		out = append(out, res)
		if opt.OnResult != nil {
			opt.OnResult(res)
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

// freshDB returns a new database location for one scenario.
func (h *harness) freshDB(name string) (string, func(), error) {
	slug := strings.NewReplacer(":", "_", "-", "_").Replace(name)
	if pgdb.IsURL(h.opt.DB) {
		schema := fmt.Sprintf("chaos_%s_%d", slug, time.Now().UnixNano()%1e9)
		admin, err := pgdb.Open(context.Background(), h.opt.DB)
		if err != nil {
			return "", nil, err
		}
		defer admin.Close()
		if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
			return "", nil, err
		}
		sep := "?"
		if strings.Contains(h.opt.DB, "?") {
			sep = "&"
		}
		// The scenario's own schemas: one for its business tables, one
		// for seqbox's.
		return h.opt.DB + sep + "search_path=" + schema + "&seqbox_schema=" + schema + "_seqbox", func() {}, nil
	}
	dir, err := os.MkdirTemp(h.opt.DB, "seqbox-chaos-")
	if err != nil {
		return "", nil, err
	}
	if h.opt.Keep {
		return filepath.Join(dir, "chaos.db"), func() { h.progress("%s: kept %s", name, dir) }, nil
	}
	return filepath.Join(dir, "chaos.db"), func() { os.RemoveAll(dir) }, nil
}

// report passes where scenario name stands to Options.OnProgress.
func (h *harness) report(name, phase string, pending, kills int) {
	if h.opt.OnProgress != nil {
		h.opt.OnProgress(Progress{Scenario: name, Index: h.index, Total: h.total, Phase: phase, Pending: pending, Kills: kills,
			Elapsed: time.Since(h.started)})
	}
}

func (h *harness) progress(format string, args ...any) {
	fmt.Fprintf(h.opt.Progress, format+"\n", args...)
}

// openQueue returns a fresh queue for one scenario whose database is db:
// the embedded queue there, or a new one on the run's broker.
func (h *harness) openQueue(ctx context.Context, db string) (queue, error) {
	if h.broker != nil {
		return h.broker.open(ctx, h.opt.Lease)
	}
	q, err := embedded.Open(ctx, db, embedded.Config{Lease: h.opt.Lease})
	if err != nil {
		return nil, err
	}
	return embeddedQueue{q}, nil
}

// scenario runs one scenario end to end on a fresh database.
func (h *harness) scenario(ctx context.Context, name string) (res Result) {
	start := time.Now()
	res = Result{Scenario: name}
	defer func() { res.Elapsed = time.Since(start) }()
	db, cleanup, err := h.freshDB(name)
	if err != nil {
		res.fail("setup: %v", err)
		return res
	}
	defer cleanup()
	st, err := dbopen.Store(ctx, db)
	if err != nil {
		res.fail("open store: %v", err)
		return res
	}
	defer st.Close()
	if err := ensureTables(ctx, st.DB()); err != nil {
		res.fail("tables: %v", err)
		return res
	}
	q, err := h.openQueue(ctx, db)
	if err != nil {
		res.fail("open queue: %v", err)
		return res
	}
	defer q.Close()

	run := &scenarioRun{h: h, name: name, db: db, q: q, st: st, res: &res}
	if name == ledgerScenario {
		if run.remote, err = startFaultyRemote(h.opt.Seed); err != nil {
			res.fail("remote: %v", err)
			return res
		}
		defer run.remote.Close()
	}
	if err := run.phases(ctx); err != nil {
		res.fail("%v", err)
	}
	run.stopAll()
	if run.remote != nil {
		run.remote.check(ctx, st, &res)
	}
	// The oracle and the histories always run, a remote-side failure or not.
	verify(ctx, st, q, h.wl, &res)
	run.checkHistories(ctx)
	if name == chainScenario {
		if err := verifyChain(ctx, st, &res); err != nil {
			res.fail("verify chain: %v", err)
		}
	}
	if err := run.purge(ctx); err != nil {
		res.fail("purge: %v", err)
	}
	res.Kills = run.kills
	return res
}

// integrity runs SQLite's integrity check on the scenario's file.
func integrity(ctx context.Context, db *sql.DB, where string, res *Result) error {
	if pgdb.IsURL(where) {
		return nil
	}
	var ok string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil {
		return err
	}
	if ok != "ok" {
		res.fail("integrity_check: %s", ok)
	}
	return nil
}

// lastLine is the last non-empty line a process wrote.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
