package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/store"
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
	opt    Options
	wl     Workload
	r      *rand.Rand
	broker Broker // nil for the embedded transport
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
	if opt.Messages < 10 || opt.Keys < 1 || opt.Kills < 0 {
		return nil, fmt.Errorf("chaos: need --messages >= 10, --keys >= 1, --kills >= 0")
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
	for _, name := range names {
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

// scenarioRun is the state of one scenario.
type scenarioRun struct {
	h     *harness
	name  string
	db    string
	q     queue
	st    store.Store
	res   *Result
	procs []*proc
	aux   *proc
	// chain are the outbox chain's relay and stage B consumer, and
	// downstream the queue between them.
	chain      []*proc
	downstream *embedded.Queue
	kills      int
	// outage is set while PostgreSQL or a broker node is down and for a
	// while after: a consumer may then exit on its own (it could not
	// open its store or its transport), and is restarted as a supervisor
	// would.
	outage  atomic.Bool
	started int
	// remote is the agent-ledger scenario's remote API.
	remote *faultyRemote
}

func (s *scenarioRun) fault() string {
	if !strings.HasPrefix(s.name, "fault:") {
		return ""
	}
	return strings.TrimPrefix(s.name, "fault:")
}

func (s *scenarioRun) workerArgs(mode string) []string {
	args := []string{"--mode", mode, "--db", s.db, "--lease", s.h.opt.Lease.String(), "--workers", "2", "--batch", "32"}
	if mode == "consume" {
		args = append(args, s.q.Args()...)
	}
	if s.name == chainScenario {
		// Every process running stage A's handler emits, the redrive's
		// included: it applies messages through the same handler.
		args = append(args, "--emit")
	}
	if s.name == "fault:"+string(fault.DuringLeaseExtend) {
		args = append(args, "--slow")
	}
	if s.remote != nil {
		args = append(args, "--remote", s.remote.url)
	}
	return args
}

// consumerEnv arms a consumer process to kill itself at the scenario's
// fault point, after a random number of passes, while kills remain.
func (s *scenarioRun) consumerEnv() []string {
	f := s.fault()
	if f == "" || s.kills >= s.h.opt.Kills {
		return nil
	}
	for _, cf := range consumerFaults {
		if string(cf) == f {
			return []string{fault.Env + "=" + f + ":" + strconv.Itoa(1+s.h.r.IntN(8))}
		}
	}
	return nil
}

func (s *scenarioRun) startConsumer(i int) error {
	s.started++
	args := s.workerArgs("consume")
	if s.name == "sqlite-disk-full" && s.started <= len(s.procs) {
		args = append(args, "--disk-full-for", diskFullFor.String())
	}
	p, err := s.h.start(fmt.Sprintf("consumer-%d", i), s.consumerEnv(), args...)
	if err != nil {
		return err
	}
	s.procs[i] = p
	return nil
}

func (s *scenarioRun) phases(ctx context.Context) error {
	var bodies [][]byte
	for _, m := range s.h.wl.Phase1 {
		bodies = append(bodies, m.Body)
	}
	if err := s.q.PublishBatch(ctx, bodies); err != nil {
		return err
	}
	s.h.progress("%s: published %d messages", s.name, len(bodies))
	s.procs = make([]*proc, s.h.opt.Procs)
	for i := range s.procs {
		if err := s.startConsumer(i); err != nil {
			return err
		}
	}
	if s.name == "sqlite-checkpoint" {
		if err := s.startCheckpointer(); err != nil {
			return err
		}
	}
	if s.name == chainScenario {
		q, err := embedded.Open(ctx, s.db, embedded.Config{Name: downstreamQueue, Lease: s.h.opt.Lease})
		if err != nil {
			return err
		}
		s.downstream = q
		s.chain = make([]*proc, 2)
		for i := range s.chain {
			if err := s.startChain(i); err != nil {
				return err
			}
		}
	}
	if s.name == "sqlite-disk-full" {
		if err := s.diskFull(ctx); err != nil {
			return err
		}
	}
	if err := s.supervise(ctx, "phase 1"); err != nil {
		return err
	}
	if err := s.fixAndRedrive(ctx); err != nil {
		return err
	}
	// The late versions must find every key at its final version: first
	// let the redriven keys drain completely.
	if err := s.supervise(ctx, "redrive drain"); err != nil {
		return err
	}
	bodies = bodies[:0]
	for _, m := range s.h.wl.Phase2 {
		bodies = append(bodies, m.Body)
	}
	if err := s.q.PublishBatch(ctx, bodies); err != nil {
		return err
	}
	return s.supervise(ctx, "phase 2")
}

// supervise restarts dead consumers, deals the scenario's kills, and
// returns once the queue has stayed empty for a moment.
func (s *scenarioRun) supervise(ctx context.Context, phase string) error {
	nextKill := time.Now().Add(s.killGap())
	emptySince := time.Time{}
	pgRestarted, nodeKilled := false, false
	phaseStart, lastReport := time.Now(), time.Now()
	lastPending, movedAt := -1, time.Now()
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", phase, ctx.Err())
		}
		for i, p := range s.procs {
			if !p.exited() {
				continue
			}
			if p.killedBySIGKILL() {
				s.kills++
			} else if !s.outage.Load() {
				s.res.fail("%s exited on its own: %v; its last output: %s", p.name, p.err, tail(p.output.String(), 2000))
			}
			if err := s.startConsumer(i); err != nil {
				return err
			}
		}
		for i, p := range s.chain {
			if !p.exited() {
				continue
			}
			if p.killedBySIGKILL() {
				s.kills++
			} else {
				s.res.fail("%s exited on its own: %v; its last output: %s", p.name, p.err, tail(p.output.String(), 2000))
			}
			if err := s.startChain(i); err != nil {
				return err
			}
		}
		if s.aux != nil && s.aux.exited() {
			if s.aux.killedBySIGKILL() {
				s.kills++
			}
			if err := s.startCheckpointer(); err != nil {
				return err
			}
		}
		if s.kills < s.h.opt.Kills && time.Now().After(nextKill) {
			switch s.name {
			case "random", ledgerScenario:
				s.procs[s.h.r.IntN(len(s.procs))].kill()
			case chainScenario:
				all := append(append([]*proc{}, s.procs...), s.chain...)
				all[s.h.r.IntN(len(all))].kill()
			case "sqlite-checkpoint":
				if s.aux != nil && s.h.r.IntN(2) == 0 {
					s.aux.kill()
				} else {
					s.procs[s.h.r.IntN(len(s.procs))].kill()
				}
			}
			nextKill = time.Now().Add(s.killGap())
		}
		if s.name == "pg-restart" && !pgRestarted && phase == "phase 1" && time.Since(phaseStart) > 2*time.Second {
			pgRestarted = true
			if err := s.restartPostgres(ctx); err != nil {
				return err
			}
		}
		if k, ok := s.h.broker.(NodeKiller); ok && s.name == nodeKillScenario && !nodeKilled && phase == "phase 1" && time.Since(phaseStart) > time.Second {
			nodeKilled = true
			s.outage.Store(true)
			go func() {
				// A consumer that starts while the node is down may find
				// JetStream unavailable (503) creating its consumer.
				k.KillNode(2*time.Second, s.h.progress)
				time.AfterFunc(outageGrace, func() { s.outage.Store(false) })
			}()
		}
		// A broker that lost a node may not answer at once: ask again
		// on the next pass rather than wait.
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ready, err := s.q.Pending(pctx)
		cancel()
		if ready < 0 {
			ready = 1 // no consumer has joined yet: nothing is drained
		}
		leased := 0
		if err == nil && phase != "phase 1" {
			// After the redrive nothing may stay parked either: a released
			// message that failed transiently waits out its backoff in the
			// database, not in the queue, and the consumers' sweep brings
			// it back.
			var c store.Counts
			if c, err = s.st.Executor().Counts(ctx, Consumer); err == nil {
				ready += int(c.Held + c.Blocked)
			}
		}
		if err == nil && s.name == chainScenario {
			var more int
			more, err = s.chainPending(ctx)
			ready += more
		}
		if time.Since(lastReport) > 10*time.Second {
			lastReport = time.Now()
			s.h.progress("%s: %s still waiting: %d pending (err %v)", s.name, phase, ready+leased, err)
		}
		if err == nil && ready+leased != lastPending {
			lastPending, movedAt = ready+leased, time.Now()
		}
		if stall := s.h.opt.Stall; lastPending > 0 && stall > 0 && time.Since(movedAt) > stall {
			why := ""
			if d, ok := s.q.(describer); ok {
				why = "; " + d.Describe(ctx)
			}
			return fmt.Errorf("%s: stalled: %d pending and none settled for %s%s", phase, lastPending, stall, why)
		}
		switch {
		case err != nil:
			emptySince = time.Time{}
		case ready+leased == 0:
			if emptySince.IsZero() {
				emptySince = time.Now()
			}
			if time.Since(emptySince) > 3*s.h.opt.Lease/2 {
				s.h.progress("%s: %s drained in %s (kills so far %d)", s.name, phase, time.Since(phaseStart).Round(time.Millisecond), s.kills)
				return nil
			}
		default:
			emptySince = time.Time{}
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// outageGrace is how long after an outage ends consumers may still fail
// from it.
const outageGrace = 5 * time.Second

// diskFullFor is how long the consumers' disk stays full.
const diskFullFor = 2 * time.Second

// diskFull checks the consumers while their disk is full: they must stay
// up, say clearly that writing failed, and not commit anything; the
// supervise loop that follows checks they resume once space is back.
func (s *scenarioRun) diskFull(ctx context.Context) error {
	time.Sleep(diskFullFor * 3 / 4)
	var effects int
	if err := s.st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM record_effects`).Scan(&effects); err != nil {
		return err
	}
	if effects != 0 {
		s.res.fail("disk full: %d effects committed while no file could grow", effects)
	}
	for _, p := range s.procs {
		if p.exited() {
			s.res.fail("disk full: %s exited instead of waiting for space: %v", p.name, p.err)
		}
		out := p.output.String()
		if !strings.Contains(out, "disk is full") && !strings.Contains(out, "disk I/O error") {
			s.res.fail("disk full: %s did not report the write failure clearly; its output: %.300s", p.name, out)
		}
	}
	return nil
}

func (s *scenarioRun) killGap() time.Duration {
	return time.Duration(50+s.h.r.IntN(200)) * time.Millisecond
}

func (s *scenarioRun) startCheckpointer() error {
	p, err := s.h.start("checkpointer", nil, "--mode", "checkpoint", "--db", s.db)
	s.aux = p
	return err
}

// fixAndRedrive is the operator: fix what the poisons needed, then redrive
// the DLQ (under SIGKILL in the during_redrive scenario) until nothing but
// rejected envelopes remains.
func (s *scenarioRun) fixAndRedrive(ctx context.Context) error {
	for _, m := range s.h.wl.Phase1 {
		if m.Kind == Poison {
			if _, err := s.st.DB().ExecContext(ctx, `INSERT INTO chaos_fixed (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, m.ID); err != nil {
				return fmt.Errorf("fix poison: %w", err)
			}
		}
	}
	failures := 0
	for attempt := 0; ; attempt++ {
		var env []string
		if s.name == "fault:"+string(fault.DuringRedrive) && s.kills < s.h.opt.Kills {
			// Armed within the dead letters still open, so the point is
			// reached (a larger n killed nothing in small runs).
			open, err := s.openDeadLetters(ctx)
			if err != nil {
				return err
			}
			if open > 0 {
				env = []string{fault.Env + "=" + string(fault.DuringRedrive) + ":" + strconv.Itoa(1+s.h.r.IntN(min(open, 5)))}
			}
		}
		p, err := s.h.runOnce(ctx, "redrive", env, s.workerArgs("redrive")...)
		if err != nil {
			return err
		}
		switch {
		case p.err == nil:
			s.h.progress("%s: redrive done after %d kills", s.name, s.kills)
			return nil
		case p.killedBySIGKILL():
			s.kills++
		default:
			// An operator reruns a redrive that failed on a busy database;
			// it is idempotent (resolved rows are skipped). Give up only
			// when it keeps failing.
			failures++
			s.h.progress("%s: redrive process failed (%d): %s", s.name, failures, lastLine(p.output.String()))
			if failures >= 5 {
				return fmt.Errorf("redrive process failed %d times: %v: %s", failures, p.err, lastLine(p.output.String()))
			}
			time.Sleep(time.Second)
		}
		if attempt > 1000 {
			return fmt.Errorf("redrive never finished")
		}
	}
}

// openDeadLetters counts the consumer's dead letters still open.
func (s *scenarioRun) openDeadLetters(ctx context.Context) (int, error) {
	var n int
	err := s.st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_dlq WHERE consumer = $1 AND state = 'open'`, Consumer).Scan(&n)
	return n, err
}

// purge runs retention 60 days in the future (under SIGKILL in the
// during_purge scenario) and checks that it removed every identity and
// nothing else.
func (s *scenarioRun) purge(ctx context.Context) error {
	effectsBefore := s.res.ActualEffects
	args := append(s.workerArgs("purge"), "--now-offset", (60 * 24 * time.Hour).String())
	failures := 0
	for attempt := 0; ; attempt++ {
		var env []string
		if s.name == "fault:"+string(fault.DuringPurge) && s.kills < s.h.opt.Kills {
			// Its first batch: a small run purges in a few, and a later n
			// killed nothing; each run killed so purges less, so the kills
			// still fall at different rows.
			env = []string{fault.Env + "=" + string(fault.DuringPurge) + ":1"}
		}
		p, err := s.h.runOnce(ctx, "purge", env, args...)
		if err != nil {
			return err
		}
		if p.err == nil {
			break
		}
		if !p.killedBySIGKILL() {
			failures++
			s.h.progress("%s: purge process failed (%d): %s", s.name, failures, lastLine(p.output.String()))
			if failures >= 5 {
				return fmt.Errorf("purge process failed %d times: %v: %s", failures, p.err, lastLine(p.output.String()))
			}
			time.Sleep(time.Second)
			continue
		}
		s.kills++
		if attempt > 1000 {
			return fmt.Errorf("purge never finished")
		}
	}
	c, err := s.st.Executor().Counts(ctx, Consumer)
	if err != nil {
		return err
	}
	if c.InboxRows != 0 {
		s.res.fail("purge left %d inbox identities past retention", c.InboxRows)
	}
	var effects int
	if err := s.st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM record_effects WHERE consumer = $1`, Consumer).Scan(&effects); err != nil {
		return err
	}
	if effects != effectsBefore {
		s.res.fail("purge changed business effects: %d before, %d after", effectsBefore, effects)
	}
	return integrity(ctx, s.st.DB(), s.db, s.res)
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

// restartPostgres stops the cluster the hard way and starts it again.
func (s *scenarioRun) restartPostgres(ctx context.Context) error {
	if s.h.opt.PGData == "" || s.h.opt.PGBin == "" {
		return fmt.Errorf("pg-restart needs --pg-data and --pg-bin (or SEQBOX_TEST_POSTGRES_DATA/BIN)")
	}
	pgctl := func(args ...string) error {
		full := append([]string{filepath.Join(s.h.opt.PGBin, "pg_ctl"), "-D", s.h.opt.PGData}, args...)
		if os.Geteuid() == 0 {
			full = append([]string{"runuser", "-u", "postgres", "--"}, full...)
		}
		out, err := exec.CommandContext(ctx, full[0], full[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("pg_ctl %s: %v: %s", args[0], err, out)
		}
		return nil
	}
	s.outage.Store(true)
	if err := pgctl("stop", "-m", "immediate"); err != nil {
		return err
	}
	s.h.progress("%s: PostgreSQL stopped (immediate)", s.name)
	time.Sleep(time.Second)
	if err := pgctl("start", "-w", "-l", filepath.Join(filepath.Dir(s.h.opt.PGData), "log")); err != nil {
		return err
	}
	s.h.progress("%s: PostgreSQL started again", s.name)
	time.AfterFunc(outageGrace, func() { s.outage.Store(false) })
	return nil
}

func (s *scenarioRun) stopAll() {
	for _, p := range s.procs {
		if p != nil {
			_ = p.stop(10 * time.Second)
		}
	}
	if s.aux != nil {
		s.aux.kill()
	}
	for _, p := range s.chain {
		if p != nil {
			_ = p.stop(10 * time.Second)
		}
	}
	if s.downstream != nil {
		_ = s.downstream.Close()
	}
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
