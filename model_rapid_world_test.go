package seqbox_test

// The world of TestRapidModel (model_rapid_test.go): the scenario's events,
// the consumer processes that come and go on one database file, the fake
// remote side with its programmable answers, and the agent's log of every
// Decide call. Everything here runs inside one testing/synctest bubble per
// rapid run.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport/embedded"
)

const (
	rapidConsumer = "rapid"
	rapidSource   = "rapid"
	// rapidAction is the ledger action every Decide runs at the remote.
	rapidAction = "remote.apply"
)

var rapidQuiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// rEvent is one event of the scenario.
type rEvent struct {
	idx    int
	id     string
	key    string // "" for none
	ver    int    // 0: unversioned
	bk     string // business key, "" for none
	poison bool
	body   []byte
	// other is a copy of the event under its identity with another
	// payload (other data): a producer reusing the id for other content,
	// or a racing copy. At most one of body and other is the identity's;
	// every copy of the other must end a collision.
	other []byte
	// hash and otherHash are the payload hashes of body and other, as
	// the library computes them.
	hash, otherHash string
}

// bodyOf is the copy's bytes: the event's own, or its other payload.
func (e *rEvent) bodyOf(other bool) []byte {
	if other {
		return e.other
	}
	return e.body
}

// hashName names one of e's payload hashes for the log.
func (e *rEvent) hashName(h string) string {
	switch h {
	case e.hash:
		return "payload A"
	case e.otherHash:
		return "payload B"
	}
	return fmt.Sprintf("payload %.8s", h)
}

func (e *rEvent) String() string { return e.id }

// rConfig is what one run draws about the consumer and the queue.
type rConfig struct {
	firstVersion bool // FirstVersion = 1, else the first version seen is the baseline
	releaseDL    bool // OnDeadLetter = release, else block
	holdAdvance  bool // HoldExpiry = advance, else block
	maxAttempts  int
	workers      int
	batch        int
	sharedQueue  bool // the queue in the store's file: the ack is part of the commit
	lease        time.Duration
	extend       bool // the consumer extends its leases; else a slow decision outlives its lease
	// frozenClock: every reading of one instant of the bubble's clock is
	// the same (as under a fixed Config.Now, or clocks a little apart on
	// two machines); otherwise each reading is at least a microsecond
	// after the one before, as a real clock's.
	frozenClock bool
	holdTimeout time.Duration
	// maxAge is the consumer's business deadline (Policies.MaxAge; 0:
	// none). Every event occurred at the run's start (scenario), so time
	// passing expires the events not yet decided.
	maxAge time.Duration
	// slowCommit (PostgreSQL): every commit of the pipeline waits up to
	// twice this long first (a disk that stalls), widening the window in
	// which another process's transaction runs beside it.
	slowCommit time.Duration
	// noDecide: the consumer has no Config.Decide, only a Handler that
	// fails when the "fail" action says so (world.plainHandler): the
	// turns, retries and order of a consumer without an agent.
	noDecide bool
}

func (c rConfig) String() string {
	return fmt.Sprintf("firstVersion=%v onDeadLetter=%s holdExpiry=%s maxAttempts=%d workers=%d batch=%d sharedQueue=%v lease=%s extend=%v frozenClock=%v maxAge=%s noDecide=%v",
		c.firstVersion, map[bool]string{true: "release", false: "block"}[c.releaseDL],
		map[bool]string{true: "advance", false: "block"}[c.holdAdvance], c.maxAttempts, c.workers, c.batch,
		c.sharedQueue, c.lease, c.extend, c.frozenClock, c.maxAge, c.noDecide)
}

// The timing of every run, on the bubble's fake clock.
const (
	rHoldTimeout   = 2 * time.Minute
	rDecideTimeout = 30 * time.Second
	rLedgerTimeout = 20 * time.Second
	rHeartbeat     = time.Second
	rBackoff       = time.Second
	rMaxBackoff    = 8 * time.Second
)

// world is one rapid run: a database file, a publisher, the processes
// that consumed from it, the remote side and the agent's log.
type world struct {
	dir, path, qpath string
	cfg              rConfig
	events           []*rEvent
	byID             map[string]*rEvent
	published        []int // copies published, by event index
	// delivered counts the copies handed to Consumer.Deliver directly (the
	// "deliver" action), by event index: never in the queue.
	delivered []int
	// pubHashes are the payload hashes published, by event id.
	pubHashes map[string]map[string]bool

	// On PostgreSQL (TestRapidModelPostgres): the store's URL, the queue's
	// (the store's own, or another schema), the queue's table as the
	// store's connections name it, and the slots of the processes that
	// run at once, each consuming its own queue (as members of a group
	// own their partitions).
	pg          bool
	pgURL, qURL string
	qTable      string
	slots       []*process
	pubs        []*embedded.Queue

	st  store.Store // the checker's and the publisher's own connections
	qdb *sql.DB
	pub *embedded.Queue

	remote *remote
	agent  *agentLog

	proc    *process // the live consumer process, or nil
	procs   int
	noCrash atomic.Bool // the final drain: hooks never fire
	fixed   atomic.Bool // the poison event's cause was fixed (an operator's redrive)

	mu    sync.Mutex
	trace []string // what the goroutines saw, logged by the root at the next check
	// history is the whole run's log, actions included, for the failure
	// message (a failure rapid cannot replay still shows how it came).
	history []string

	clockMu   sync.Mutex
	lastClock time.Time

	// outcomes counts the outcomes observed since the last check; a
	// process that reaches hotLoop of them is killed and the check fails
	// (a livelock keeps the fake clock from moving).
	outcomes atomic.Int64
	hot      atomic.Bool

	// failNext counts, by event id, the handler runs still to fail (the
	// "fail" action of a run with noDecide; under mu).
	failNext map[string]int
	// holders are the identities seen holding their key's turn at the
	// last check, by key, and appliedSeen the apply log's last sequence
	// then (checkTurnOrder; the root goroutine's own).
	holders     map[string][]string
	appliedSeen int64
}

// hotLoop is how many outcomes between two checks count as a livelock:
// a run publishes a few dozen copies.
const hotLoop = 1000

// now is the clock every component of the run reads (Config.Now,
// effects.Config.Now, embedded.Config.Now): the bubble's fake time, and
// with a ticking clock never the same reading twice.
func (w *world) now() time.Time {
	t := time.Now()
	if w.cfg.frozenClock {
		return t
	}
	w.clockMu.Lock()
	defer w.clockMu.Unlock()
	if !t.After(w.lastClock) {
		t = w.lastClock.Add(time.Microsecond)
	}
	w.lastClock = t
	return t
}

// note records a line for the run's log (any goroutine).
func (w *world) note(format string, args ...any) {
	line := fmt.Sprintf("%8s ", fakeNow()) + fmt.Sprintf(format, args...)
	w.mu.Lock()
	w.trace = append(w.trace, line)
	w.history = append(w.history, line)
	w.mu.Unlock()
}

// step logs one of the test's own actions.
func (w *world) step(t *rapid.T, format string, args ...any) {
	line := fmt.Sprintf("%8s ", fakeNow()) + "== " + fmt.Sprintf(format, args...)
	w.mu.Lock()
	w.history = append(w.history, line)
	w.mu.Unlock()
	t.Log(line)
}

// recent is the end of the run's log, n lines at most, a line repeated
// (but for its time) shown once with its count.
func (w *world) recent(n int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	var last string
	repeat := 0
	flush := func() {
		if repeat > 0 {
			out[len(out)-1] += fmt.Sprintf("  (and %d more times, until later)", repeat)
		}
		repeat = 0
	}
	for _, l := range w.history {
		body := strings.TrimSpace(l)
		if i := strings.IndexByte(body, ' '); i >= 0 {
			body = body[i+1:]
		}
		if body == last {
			repeat++
			continue
		}
		flush()
		last = body
		out = append(out, l)
	}
	flush()
	return strings.Join(out[max(0, len(out)-n):], "\n    ")
}

// flushTrace logs what the goroutines noted since the last call.
func (w *world) flushTrace(t *rapid.T) {
	w.mu.Lock()
	lines := w.trace
	w.trace = nil
	w.mu.Unlock()
	for _, l := range lines {
		t.Log(l)
	}
}

// bubbleStart is the fake clock's origin (synctest starts every bubble at
// midnight UTC, 2000-01-01).
var bubbleStart = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// rapidEpoch is the origin of the run's log times: bubbleStart inside a
// bubble, the run's start on the real clock (TestRapidModelPostgres).
var rapidEpoch atomic.Pointer[time.Time]

func fakeNow() string {
	epoch := bubbleStart
	if e := rapidEpoch.Load(); e != nil {
		epoch = *e
	}
	return time.Since(epoch).Truncate(time.Millisecond).String()
}

// scenario builds the run's events: a versioned key k0 and an unversioned
// key k1 with n events each, the first of k0 asking for business key bk0;
// an event with a new identity and no partition key asking for bk0 too;
// when poison, k1's last event is refused by the agent; and pairs pairs
// of events of keys kaI and kbI asking for business key bkI. Every event
// also has another payload under its id (rEvent.other). The nth event of
// a key occurred at at plus n-1 steps (the others at at), so that time
// passing expires a key's first events before its later ones.
func scenario(n int, poison bool, pairs int, at time.Time, step time.Duration) []*rEvent {
	var out []*rEvent
	add := func(e *rEvent, nth int) {
		e.idx = len(out)
		occurred := at.Add(time.Duration(nth-1) * step)
		fields := []string{fmt.Sprintf(`"specversion":"1.0","id":%q,"source":%q,"type":"rapid.step","time":%q`, e.id, rapidSource, occurred.Format(time.RFC3339Nano))}
		if e.key != "" {
			fields = append(fields, fmt.Sprintf(`"partitionkey":%q`, e.key))
		}
		if e.ver > 0 {
			fields = append(fields, fmt.Sprintf(`"objectversion":%d`, e.ver))
		}
		if e.bk != "" {
			fields = append(fields, fmt.Sprintf(`"businesskey":%q`, e.bk))
		}
		e.body = []byte("{" + strings.Join(append(slices.Clone(fields), fmt.Sprintf(`"data":{"n":%d}`, e.idx)), ",") + "}")
		e.other = []byte("{" + strings.Join(append(fields, fmt.Sprintf(`"data":{"n":%d,"amount":1000}`, e.idx)), ",") + "}")
		for _, c := range []struct {
			raw []byte
			h   *string
		}{{e.body, &e.hash}, {e.other, &e.otherHash}} {
			ev, err := seqboxtype.ParseEvent(c.raw)
			if err != nil {
				panic(fmt.Sprintf("scenario event %s: %v", c.raw, err))
			}
			*c.h = ev.Hash
		}
		out = append(out, e)
	}
	for v := 1; v <= n; v++ {
		e := &rEvent{id: fmt.Sprintf("k0-v%d", v), key: "k0", ver: v}
		if v == 1 {
			e.bk = "bk0"
		}
		add(e, v)
	}
	for i := 1; i <= n; i++ {
		add(&rEvent{id: fmt.Sprintf("k1-e%d", i), key: "k1", poison: poison && i == n}, i)
	}
	add(&rEvent{id: "bk-dup", bk: "bk0"}, 1)
	for i := 1; i <= pairs; i++ {
		// Two events of other ids and other partition keys sharing one
		// business key, published at the same instant (the "pair"
		// action of TestRapidModelPostgres).
		add(&rEvent{id: fmt.Sprintf("bx%d-a", i), key: fmt.Sprintf("ka%d", i), bk: fmt.Sprintf("bk%d", i)}, 1)
		add(&rEvent{id: fmt.Sprintf("bx%d-b", i), key: fmt.Sprintf("kb%d", i), bk: fmt.Sprintf("bk%d", i)}, 1)
	}
	return out
}

// newWorld opens the run's database and queue and creates the handler's
// apply log.
func newWorld(ctx context.Context, dir string, cfg rConfig, events []*rEvent) (*world, error) {
	w := &world{dir: dir, cfg: cfg, events: events, byID: map[string]*rEvent{}, published: make([]int, len(events)), delivered: make([]int, len(events)),
		pubHashes: map[string]map[string]bool{}, remote: newRemote(), agent: newAgentLog()}
	for _, e := range events {
		w.byID[e.id] = e
	}
	w.path = dir + "/seqbox.db"
	w.qpath = w.path
	if !cfg.sharedQueue {
		w.qpath = dir + "/queue.db"
	}
	var err error
	if w.st, err = sqlite.Open(ctx, w.path); err != nil {
		return nil, err
	}
	if err := w.createApplyLog(ctx); err != nil {
		return nil, err
	}
	if w.pub, err = embedded.Open(ctx, w.qpath, w.queueConfig()); err != nil {
		return nil, err
	}
	if w.cfg.sharedQueue {
		w.qdb = w.st.DB()
	} else if w.qdb, err = sql.Open("sqlite", "file:"+w.qpath+"?_pragma=busy_timeout(10000)"); err != nil {
		return nil, err
	}
	return w, nil
}

// createApplyLog creates the handler's apply log: what it applied, with
// the payload hash of the copy it applied and the decision it read.
func (w *world) createApplyLog(ctx context.Context) error {
	seq := "INTEGER PRIMARY KEY AUTOINCREMENT"
	if w.pg {
		seq = "BIGSERIAL PRIMARY KEY"
	}
	_, err := w.st.DB().ExecContext(ctx, `CREATE TABLE rapid_applied (
		seq `+seq+`, source TEXT NOT NULL, id TEXT NOT NULL, partitionkey TEXT NOT NULL,
		version BIGINT, businesskey TEXT NOT NULL, hash TEXT NOT NULL, decision TEXT NOT NULL, at BIGINT NOT NULL)`)
	return err
}

// queueConfig is the embedded queue's: a receive polls every half second
// of fake time (each poll is a write transaction; runs span many fake
// minutes).
func (w *world) queueConfig() embedded.Config { return w.queueConfigFor(0) }

// queueConfigFor is the queue of a slot: on PostgreSQL each slot's
// process consumes a queue of its own, polled every 50 ms of real time.
func (w *world) queueConfigFor(slot int) embedded.Config {
	if w.pg {
		return embedded.Config{Name: fmt.Sprintf("q%d", slot), Lease: w.cfg.lease, PollInterval: 50 * time.Millisecond,
			Wait: 200 * time.Millisecond, Now: w.now}
	}
	return embedded.Config{Lease: w.cfg.lease, PollInterval: 500 * time.Millisecond, Wait: time.Second, Now: w.now}
}

// queueLocation is where the queue lives: a SQLite file, or a PostgreSQL
// URL.
func (w *world) queueLocation() string {
	if w.pg {
		return w.qURL
	}
	return w.qpath
}

// rTiming is the timing of a run: on the bubble's fake clock (SQLite) or,
// scaled down, on the real one (PostgreSQL).
type rTiming struct {
	heartbeat, decide, ledger, backoff, maxBackoff time.Duration
}

func (w *world) timing() rTiming {
	if w.pg {
		return pgTiming
	}
	return rTiming{heartbeat: rHeartbeat, decide: rDecideTimeout, ledger: rLedgerTimeout, backoff: rBackoff, maxBackoff: rMaxBackoff}
}

// close stops the live process and closes every connection.
func (w *world) close() {
	if w.proc != nil {
		w.kill(w.proc, "end of run")
	}
	w.pub.Close()
	if !w.cfg.sharedQueue && w.qdb != nil {
		w.qdb.Close()
	}
	w.st.Close()
}

// quiesce lets every goroutine of the bubble run until it blocks on the
// fake clock, a channel or the remote side.
func quiesce() { synctest.Wait() }

// advance moves the fake clock by d: the live process, if any, runs
// through it (its polls, heartbeats, lease extensions, backoffs, sweeps).
// Inside the synctest bubble, time.Sleep waits on no real time: the
// bubble's clock jumps once every goroutine blocks, and synctest.Wait then
// waits until they have run up to their next block.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// publish puts one more copy of e in the queue.
func (w *world) publish(ctx context.Context, e *rEvent) error {
	return w.publishTo(ctx, w.pub, e, false)
}

// publishTo puts one more copy of e (its other payload if other) in q.
func (w *world) publishTo(ctx context.Context, q *embedded.Queue, e *rEvent, other bool) error {
	if err := q.Publish(ctx, e.bodyOf(other)); err != nil {
		return err
	}
	w.published[e.idx]++
	w.published1(e, other)
	return nil
}

// published1 notes that a copy of e with that payload was published.
func (w *world) published1(e *rEvent, other bool) {
	h := e.hash
	if other {
		h = e.otherHash
	}
	if w.pubHashes[e.id] == nil {
		w.pubHashes[e.id] = map[string]bool{}
	}
	w.pubHashes[e.id][h] = true
}

// process is one consumer process: its own store and queue connections,
// ledger and consumer, running Run until it is stopped or crashes.
type process struct {
	n      int
	slot   int
	st     store.Store
	q      *embedded.Queue
	ledger *effects.Ledger
	c      *seqbox.Consumer
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan error // Run's result
	dead   atomic.Bool
	ops    sync.WaitGroup // operator actions running in this process

	mu    sync.Mutex
	armed fault.Point // a crash waiting at this point
	armN  int         // at its armN-th passage
	// delivering are the copies handed to Deliver (the "deliver" action)
	// without an outcome yet: should the process die, its broker hands
	// them out again (reap publishes them to the queue).
	delivering map[*delivered]bool
}

// delivered is a copy handed to Consumer.Deliver.
type delivered struct {
	e     *rEvent
	other bool
}

func (p *process) String() string { return fmt.Sprintf("P%d", p.n) }

// start opens a new consumer process on the run's files and runs it.
func (w *world) start(ctx context.Context) (*process, error) { return w.startIn(ctx, 0) }

// startIn opens a new consumer process in slot (on PostgreSQL, one of the
// processes running at once) and runs it.
func (w *world) startIn(ctx context.Context, slot int) (*process, error) {
	w.procs++
	p := &process{n: w.procs, slot: slot, done: make(chan error, 1)}
	var err error
	tm := w.timing()
	if w.pg {
		p.st, err = postgres.Open(ctx, w.pgURL)
	} else {
		p.st, err = sqlite.Open(ctx, w.path)
	}
	if err != nil {
		return nil, err
	}
	if p.q, err = embedded.Open(ctx, w.queueLocation(), w.queueConfigFor(slot)); err != nil {
		p.st.Close()
		return nil, err
	}
	p.ledger, err = effects.New(p.st, effects.Config{Reconcile: w.remote.reconcile, Timeout: tm.ledger, Heartbeat: tm.heartbeat, Now: w.now})
	if err != nil {
		return nil, err
	}
	first := int64(1)
	cfg := seqbox.Config{
		Name: rapidConsumer, Store: p.st, Transport: p.q,
		Decide:        w.decider(p),
		Handler:       w.handler,
		DecideTimeout: tm.decide, ClaimHeartbeat: tm.heartbeat,
		Workers: w.cfg.workers, BatchSize: w.cfg.batch,
		Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: w.cfg.maxAttempts, InitialBackoff: tm.backoff, MaxBackoff: tm.maxBackoff}, HoldTimeout: w.cfg.holdTimeout,
			MaxAge: w.cfg.maxAge},
		Now:    w.now,
		Logger: rapidQuiet,
		Observer: func(r seqboxtype.Result) {
			n := w.outcomes.Add(1)
			if n <= 50 || n%100 == 0 {
				w.note("%s %s: %s %s", p, r.ID, r.Outcome, r.Reason)
			}
			if n == hotLoop {
				w.hot.Store(true)
				w.note("%s LIVELOCK: %d outcomes since the last check; killed", p, n)
				p.dead.Store(true)
				p.cancel(fault.ErrCrash)
			}
		},
	}
	if w.cfg.firstVersion {
		cfg.FirstVersion = &first
	}
	if w.cfg.noDecide {
		cfg.Decide, cfg.Handler = nil, w.plainHandler
	}
	if w.cfg.releaseDL {
		cfg.OnDeadLetter = seqbox.DeadLetterRelease
	}
	if w.cfg.holdAdvance {
		cfg.HoldExpiry = seqbox.HoldExpiryAdvance
	}
	if w.cfg.extend {
		cfg.ExtendEvery, cfg.ExtendBy = w.cfg.lease/3, w.cfg.lease
	} else {
		cfg.ExtendEvery = time.Hour // a slow decision outlives its lease
	}
	if p.c, err = seqbox.NewConsumer(armed(cfg, w.hook(p))); err != nil {
		return nil, err
	}
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	go func() { p.done <- p.c.Run(p.ctx) }()
	if w.pg {
		w.slots[slot] = p
	} else {
		w.proc = p
	}
	w.note("%s started", p)
	return p, nil
}

// hook is the process's fault hook: once the process is dead every point
// crashes, and an armed point crashes at its N-th passage.
func (w *world) hook(p *process) fault.Hook {
	return func(pt fault.Point) error {
		if p.dead.Load() {
			return fault.ErrCrash
		}
		if pt == fault.BeforeCommit && w.cfg.slowCommit > 0 {
			// Up to twice slowCommit, drawn per commit: of two
			// transactions racing, the one that began first may commit
			// last.
			time.Sleep(rand.N(2 * w.cfg.slowCommit))
		}
		if w.noCrash.Load() {
			return nil
		}
		p.mu.Lock()
		hit := p.armed == pt
		if hit {
			p.armN--
			hit = p.armN == 0
		}
		p.mu.Unlock()
		if !hit {
			return nil
		}
		w.note("%s CRASHES at %s", p, pt)
		p.dead.Store(true)
		// Everything of the process stops now: its operator actions as
		// well as Run, and no copy is nacked (a crash settles nothing).
		p.cancel(fault.ErrCrash)
		return fault.ErrCrash
	}
}

// arm makes p crash the n-th time it reaches pt.
func (p *process) arm(pt fault.Point, n int) {
	p.mu.Lock()
	p.armed, p.armN = pt, n
	p.mu.Unlock()
}

// kill is SIGKILL: the process dies where it stands. Remote calls in
// flight end without their answer reaching the ledger (their goroutine
// exits; the pending row stays pending), Run stops without settling
// anything at the broker, and the process's connections close.
func (w *world) kill(p *process, why string) {
	if !p.dead.Swap(true) {
		w.note("%s KILLED (%s)", p, why)
	}
	p.cancel(fault.ErrCrash)
	w.reap(p)
}

// reap waits for a dead or stopped process to end and closes its
// connections. It reports Run's error when it is neither nil nor a crash.
func (w *world) reap(p *process) error {
	var err error
	select {
	case err = <-p.done:
	case <-time.After(time.Minute): // fake time: Run must stop within a minute of its crash
		return fmt.Errorf("%s did not stop within a minute of its crash", p)
	}
	p.ops.Wait()
	if !w.pg {
		quiesce()
	}
	p.mu.Lock()
	for d := range p.delivering {
		// Its Deliver died with the process: the broker's lease on it
		// runs out, and it comes back through the queue.
		if err := w.publishTo(context.Background(), w.pub, d.e, d.other); err != nil {
			p.mu.Unlock()
			return err
		}
		w.note("%s's delivered copy of %s comes back through the queue", p, d.e)
	}
	p.delivering = nil
	p.mu.Unlock()
	p.q.Close()
	p.st.Close()
	if w.proc == p {
		w.proc = nil
	}
	if w.pg && w.slots[p.slot] == p {
		w.slots[p.slot] = nil
	}
	if err != nil && !fault.IsCrash(err) {
		return fmt.Errorf("%s: Run returned %v", p, err)
	}
	return nil
}

// reapIfDone notices a process whose Run ended (an armed crash fired).
func (w *world) reapIfDone() error {
	p := w.proc
	if p == nil || !p.dead.Load() {
		return nil
	}
	return w.reap(p)
}

// operator runs an operator action in p, as the consumer that owns the
// handler does for the CLI's requests; it may wait for the remote side,
// so it runs on a goroutine of its own and dies with the process.
func (w *world) operator(p *process, what string, f func(ctx context.Context) ([]seqboxtype.Result, error)) {
	p.ops.Add(1)
	go func() {
		defer p.ops.Done()
		results, err := f(p.ctx)
		var got []string
		for _, res := range results {
			got = append(got, res.ID+":"+string(res.Outcome))
		}
		w.note("%s operator %s -> %v err=%v", p, what, got, err)
	}()
}

// handler is the application's handler: it records the decision it
// applies in the inbox transaction (the apply log the invariants read).
func (w *world) handler(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
	d, ok := seqbox.DecisionFrom(ctx)
	if !ok {
		return seqbox.Permanent(errors.New("no recorded decision in the handler's context"))
	}
	return recordApplied(ctx, tx, ev, string(d))
}

// recordApplied writes ev, applied with decision, to the apply log.
func recordApplied(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event, decision string) error {
	var ver any
	if ev.ObjectVersion != nil {
		ver = *ev.ObjectVersion
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO rapid_applied (source, id, partitionkey, version, businesskey, hash, decision, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, ev.Source, ev.ID, ev.PartitionKey, ver, ev.BusinessKey, ev.Hash, decision, time.Now().UnixMicro())
	return err
}

// plainHandler is the Handler of a consumer without Decide: it fails
// when the "fail" action asked it to (a transient error), fails the
// poison event for good until an operator fixes its cause, and
// otherwise records what it applies in the inbox transaction, as
// handler does (with no decision).
func (w *world) plainHandler(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
	e := w.byID[ev.ID]
	if e == nil {
		return seqbox.Permanent(fmt.Errorf("%s was never published", ev.ID))
	}
	if e.poison && !w.fixed.Load() {
		return seqbox.Permanent(errors.New("poison: the handler cannot handle this event"))
	}
	w.mu.Lock()
	fail := w.failNext[e.id] > 0
	if fail {
		w.failNext[e.id]--
	}
	w.mu.Unlock()
	if fail {
		return fmt.Errorf("%s: a transient failure (the fail action)", e)
	}
	return recordApplied(ctx, tx, ev, "")
}

// failHandler makes the next n handler runs of e fail (noDecide).
func (w *world) failHandler(e *rEvent, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failNext == nil {
		w.failNext = map[string]int{}
	}
	w.failNext[e.id] += n
}

// errRefused is the remote side's permanent refusal; Decide dead-letters
// its event.
var errRefused = errors.New("422: the remote side refuses this request for good")

// decider is p's Config.Decide: the agent's step, one ledger call at the
// remote side. The poison event is refused before any call until an
// operator fixes its cause.
func (w *world) decider(p *process) seqbox.Decider {
	return func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		e := w.byID[ev.ID]
		a := w.agent.begin(w, p, e, ev.Hash)
		defer w.agent.end(w, a)
		if e.poison && !w.fixed.Load() {
			a.failed = true
			return nil, seqbox.Permanent(errors.New("poison: the agent cannot handle this event"))
		}
		ref, err := p.ledger.Do(ctx, rapidAction, func(ctx context.Context, key string) (string, error) {
			return w.remote.call(ctx, w, p, key, e, ev.Hash)
		})
		if err != nil {
			a.failed = true
			if errors.Is(err, errRefused) {
				return nil, seqbox.Permanent(err)
			}
			return nil, err
		}
		a.ok = true
		return []byte(ref), nil
	}
}

// answer is how the remote side answers one call.
type answer int

const (
	ansNone      answer = iota
	ansOK               // applied; the reference comes back
	ansTransient        // a 503 that applied nothing: uncertain for the ledger
	ansThrottled        // a 429 with Retry-After, nothing applied
	ansLost             // applied, then the connection broke: uncertain
	ansRedirect         // a 3xx: definitely not applied (failed)
	ansRefuse           // a permanent refusal: definitely not applied, dead letter
)

var answerNames = map[answer]string{ansOK: "ok", ansTransient: "503", ansThrottled: "429", ansLost: "lost-after-apply",
	ansRedirect: "redirect", ansRefuse: "refuse"}

func (a answer) String() string { return answerNames[a] }

// remoteCall is one request waiting at the remote side for its answer.
type remoteCall struct {
	seq    int
	proc   *process
	key    string
	ev     *rEvent
	hash   string // the payload hash of the copy the request was made for
	answer chan answer
}

// remote is the fake remote side: it applies every request it is told to
// (it does not deduplicate by idempotency key, so a second call that
// applies shows), and answers the lookups of Reconcile truthfully.
type remote struct {
	mu       sync.Mutex
	seq      int
	pending  []*remoteCall
	applied  map[string]int // idempotency key → effects applied
	requests map[string]int // idempotency key → requests received
	refs     map[string]string
	events   map[string]*rEvent         // idempotency key → event
	hashes   map[string]map[string]bool // idempotency key → payload hashes requested
	// auto answers every call at once (the final drain).
	auto answer
	// abandonApplies: a call its caller gave up on (timeout, crash) had
	// applied before the caller left.
	abandonApplies bool
}

func newRemote() *remote {
	return &remote{applied: map[string]int{}, requests: map[string]int{}, refs: map[string]string{}, events: map[string]*rEvent{},
		hashes: map[string]map[string]bool{}}
}

// call is the Call the ledger makes for e under key.
func (r *remote) call(ctx context.Context, w *world, p *process, key string, e *rEvent, hash string) (string, error) {
	r.mu.Lock()
	r.requests[key]++
	r.events[key] = e
	if r.hashes[key] == nil {
		r.hashes[key] = map[string]bool{}
	}
	r.hashes[key][hash] = true
	r.seq++
	c := &remoteCall{seq: r.seq, proc: p, key: key, ev: e, hash: hash, answer: make(chan answer, 1)}
	// What the request may not meet at the remote side:
	//   - a request under the same idempotency key still running in a
	//     live process (a ledger lease or a decision claim that stopped
	//     renewing let a second caller in);
	//   - a business key another identity's request holds or applied.
	for _, o := range r.pending {
		if o.key == key && !o.proc.dead.Load() {
			w.agent.violate("once at the remote side: request #%d for %s in %s under the idempotency key of request #%d, still running in live %s (a lease or claim that stopped renewing)",
				c.seq, e, p, o.seq, o.proc)
		}
		if e.bk != "" && o.ev.bk == e.bk && o.ev.id != e.id {
			w.agent.violate("a business key at the agent once: request #%d for %s in %s while request #%d for %s, business key %s too, is in flight",
				c.seq, e, p, o.seq, o.ev, e.bk)
		}
	}
	if e.bk != "" {
		for k, n := range r.applied {
			if o := r.events[k]; n > 0 && o.bk == e.bk && o.id != e.id {
				w.agent.violate("a business key at the agent once: request #%d for %s in %s though %s already applied business key %s at the remote side",
					c.seq, e, p, o, e.bk)
			}
		}
	}
	if r.auto != ansNone {
		ref, err := r.respondLocked(c, r.auto)
		r.mu.Unlock()
		w.note("%s remote %s #%d auto %s", p, e, c.seq, r.auto)
		return ref, err
	}
	r.pending = append(r.pending, c)
	r.mu.Unlock()
	w.note("%s remote %s #%d waits for its answer", p, e, c.seq)
	select {
	case a := <-c.answer:
		r.mu.Lock()
		ref, err := r.respondLocked(c, a)
		r.mu.Unlock()
		if p.dead.Load() {
			runtime.Goexit() // the process died: nobody reads the answer
		}
		return ref, err
	case <-ctx.Done():
	}
	r.mu.Lock()
	if i := slices.Index(r.pending, c); i >= 0 {
		r.pending = slices.Delete(r.pending, i, i+1)
		applied := r.abandonApplies
		if applied {
			r.applyLocked(c)
		}
		r.mu.Unlock()
		w.note("%s remote %s #%d abandoned by its caller (applied=%v, caller dead=%v)", p, e, c.seq, applied, p.dead.Load())
	} else {
		// Answered as the caller gave up.
		a := <-c.answer
		r.respondLocked(c, a)
		r.mu.Unlock()
	}
	if p.dead.Load() {
		runtime.Goexit() // SIGKILL mid-call: the ledger row stays pending
	}
	return "", fmt.Errorf("remote: no answer: %w", ctx.Err())
}

func (r *remote) applyLocked(c *remoteCall) string {
	r.applied[c.key]++
	ref := fmt.Sprintf("ref-%s-%.8s-%d", c.ev.id, c.hash, r.applied[c.key])
	r.refs[c.key] = ref
	return ref
}

func (r *remote) respondLocked(c *remoteCall, a answer) (string, error) {
	switch a {
	case ansOK:
		return r.applyLocked(c), nil
	case ansTransient:
		return "", errors.New("503 service unavailable")
	case ansThrottled:
		return "", seqbox.RetryAfter(errors.New("429 too many requests"), 2*time.Second)
	case ansLost:
		r.applyLocked(c)
		return "", errors.New("connection reset by peer after the request was sent")
	case ansRedirect:
		return "", effects.Definite(errors.New(`302 found (redirect to "https://elsewhere.example/" not followed)`))
	case ansRefuse:
		return "", effects.Definite(errRefused)
	}
	return "", fmt.Errorf("unknown answer %d", a)
}

// waiting lists the calls waiting for an answer, oldest first.
func (r *remote) waiting() []*remoteCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.pending)
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// answerCall answers c with a, unless its caller gave up meanwhile.
func (r *remote) answerCall(c *remoteCall, a answer) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.Index(r.pending, c)
	if i < 0 {
		return false
	}
	r.pending = slices.Delete(r.pending, i, i+1)
	c.answer <- a
	return true
}

// reconcile is the ledger's Reconcile: it looks the key up at the remote
// side.
func (r *remote) reconcile(ctx context.Context, e effects.Effect) (effects.Reconciliation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.applied[e.IdempotencyKey] > 0 {
		return effects.Reconciliation{Applied: true, Ref: r.refs[e.IdempotencyKey]}, nil
	}
	return effects.Reconciliation{}, nil
}

// appliedFor is how many effects the remote side holds for e.
func (r *remote) appliedFor(e *rEvent) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied[effects.Key(rapidConsumer, rapidSource, e.id, rapidAction)]
}

// ask is one Decide call.
type ask struct {
	n        int
	proc     *process
	ev       *rEvent
	hash     string // the payload hash of the copy asked about
	ok       bool   // decided
	failed   bool   // returned an error
	finished bool
	// redriven: an operator redrove its identity since; for the order at
	// the agent the identity is ready again, as a new arrival.
	redriven bool
}

// agentLog is what the agent (Decide) was asked, checked as it is asked.
type agentLog struct {
	mu         sync.Mutex
	n          int
	asks       map[string][]*ask // by event id
	inflight   []*ask
	violations []string
}

func newAgentLog() *agentLog { return &agentLog{asks: map[string][]*ask{}} }

func (l *agentLog) violate(format string, args ...any) {
	l.mu.Lock()
	l.violations = append(l.violations, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// begin records that the agent is asked about e, and checks the agent
// path's invariants at that moment:
//   - once at the agent: no earlier call for e succeeded (its decision is
//     recorded); every earlier one failed or was lost with its process;
//   - order at the agent: no other identity of e's key is being asked,
//     none asked earlier (since its last redrive) is unsettled, no other
//     unsettled identity holds
//     the key's turn, and a versioned event is asked only while it can
//     still apply (no version at or above it applied);
//   - a business key reaches the agent once: no other identity asking
//     for it is being asked or has an effect at the remote side.
func (l *agentLog) begin(w *world, p *process, e *rEvent, hash string) *ask {
	l.mu.Lock()
	l.n++
	a := &ask{n: l.n, proc: p, ev: e, hash: hash}
	var bad []string
	for _, prev := range l.asks[e.id] {
		if prev.ok {
			bad = append(bad, fmt.Sprintf("once at the agent: %s asked again (ask #%d in %s) after ask #%d in %s was answered and recorded",
				e, a.n, p, prev.n, prev.proc))
		}
		if prev.hash != hash {
			bad = append(bad, fmt.Sprintf("one payload per identity at the agent: %s asked about %s (ask #%d in %s) after ask #%d in %s was about %s",
				e, e.hashName(hash), a.n, p, prev.n, prev.proc, e.hashName(prev.hash)))
		}
	}
	var earlier []*rEvent
	for _, o := range l.inflight {
		if o.ev.id == e.id && o.proc == p {
			bad = append(bad, fmt.Sprintf("once at the agent: %s asked twice at once in %s", e, p))
		}
		if o.ev.id == e.id && o.proc != p && !o.proc.dead.Load() {
			// A claim follows liveness: another process takes it over
			// only once its owner's heartbeat stopped.
			bad = append(bad, fmt.Sprintf("once at the agent (claims follow liveness): %s asked in %s (ask #%d) while ask #%d in live %s still runs: the model asked twice",
				e, p, a.n, o.n, o.proc))
		}
		if e.key != "" && o.ev.key == e.key && o.ev.id != e.id {
			bad = append(bad, fmt.Sprintf("order at the agent: %s asked while %s of the same key is being asked", e, o.ev))
		}
		if e.bk != "" && o.ev.bk == e.bk && o.ev.id != e.id {
			bad = append(bad, fmt.Sprintf("business key: %s asked while %s, asking for %s too, is being asked", e, o.ev, e.bk))
		}
	}
	if e.key != "" {
		for id, as := range l.asks {
			if o := w.byID[id]; id != e.id && o.key == e.key && slices.ContainsFunc(as, func(a *ask) bool { return !a.redriven }) {
				earlier = append(earlier, o)
			}
		}
	}
	l.asks[e.id] = append(l.asks[e.id], a)
	l.inflight = append(l.inflight, a)
	l.mu.Unlock()

	if e.bk != "" {
		for _, o := range w.events {
			if o.id != e.id && o.bk == e.bk && w.remote.appliedFor(o) > 0 {
				bad = append(bad, fmt.Sprintf("business key: %s asked though %s already has %s's effect at the remote side", e, o, e.bk))
			}
		}
	}
	// The database, read outside any transaction (Decide runs outside
	// one), says what is settled.
	ctx := context.Background()
	db := w.st.DB()
	for _, o := range earlier {
		if fin, what := w.final(ctx, o); !fin {
			bad = append(bad, fmt.Sprintf("order at the agent: %s asked while %s of its key, asked before, has not settled (%s)", e, o, what))
		}
	}
	if e.key != "" {
		rows, err := db.QueryContext(ctx, `SELECT id FROM seqbox_retries WHERE consumer = $1 AND partitionkey = $2 AND id <> $3`, rapidConsumer, e.key, e.id)
		if err != nil {
			bad = append(bad, "read turns: "+err.Error())
		} else {
			var ids []string
			for rows.Next() {
				var id string
				_ = rows.Scan(&id)
				ids = append(ids, id)
			}
			rows.Close()
			for _, id := range ids {
				if o := w.byID[id]; o != nil {
					if fin, what := w.final(ctx, o); !fin {
						bad = append(bad, fmt.Sprintf("one turn per key: %s asked while %s holds its key's turn (%s)", e, o, what))
					}
				}
			}
		}
	}
	if e.ver > 0 {
		var top sql.NullInt64
		if err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM rapid_applied WHERE partitionkey = $1`, e.key).Scan(&top); err != nil {
			bad = append(bad, "read apply log: "+err.Error())
		} else if top.Valid && top.Int64 >= int64(e.ver) {
			bad = append(bad, fmt.Sprintf("order at the agent: %s (version %d) asked after version %d of its key applied", e, e.ver, top.Int64))
		}
	}
	w.note("%s ASK #%d %s (%s)", p, a.n, e, e.hashName(hash))
	for _, b := range bad {
		l.violate("%s", b)
	}
	return a
}

// redrive records that an operator redrives id: its earlier asks no
// longer put it in its key's turn (a redrive makes it ready again, and the
// pipeline orders it anew).
func (l *agentLog) redrive(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.asks[id] {
		a.redriven = true
	}
}

// end records that a Decide call returned, or that its goroutine ended
// with its process (neither ok nor failed: lost).
func (l *agentLog) end(w *world, a *ask) {
	l.mu.Lock()
	a.finished = true
	if i := slices.Index(l.inflight, a); i >= 0 {
		l.inflight = slices.Delete(l.inflight, i, i+1)
	}
	l.mu.Unlock()
	what := "lost with its process"
	switch {
	case a.ok:
		what = "decided"
	case a.failed:
		what = "failed"
	}
	w.note("%s ASK #%d %s %s", a.proc, a.n, a.ev, what)
}

// hashesAsked are the payload hashes the agent was asked about for id.
func (l *agentLog) hashesAsked(id string) map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]bool{}
	for _, a := range l.asks[id] {
		out[a.hash] = true
	}
	return out
}

// takeViolations returns and forgets what the agent's checks found.
func (l *agentLog) takeViolations() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.violations
	l.violations = nil
	return v
}

// busy reports asks still in flight.
func (l *agentLog) busy() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.inflight)
}

// final reports whether e has a final outcome in the database (applied,
// semantic_duplicate, stale, expired, dead_lettered, or skipped from the
// DLQ), and what it has.
func (w *world) final(ctx context.Context, e *rEvent) (bool, string) {
	var outcome string
	err := w.st.DB().QueryRowContext(ctx, `SELECT outcome FROM seqbox_inbox WHERE consumer = $1 AND source = $2 AND id = $3`,
		rapidConsumer, rapidSource, e.id).Scan(&outcome)
	if errors.Is(err, sql.ErrNoRows) {
		outcome = "no inbox row"
	} else if err != nil {
		return false, "read inbox: " + err.Error()
	}
	switch outcome {
	case "applied", "semantic_duplicate", "stale", "expired", "dead_lettered":
		return true, outcome
	}
	var skipped int
	_ = w.st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_dlq WHERE consumer = $1 AND source = $2 AND id = $3 AND state = 'skipped'`,
		rapidConsumer, rapidSource, e.id).Scan(&skipped)
	if skipped > 0 {
		return true, "skipped"
	}
	return false, outcome
}
