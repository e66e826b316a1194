package seqbox_test

// TestRapidModelPostgres is TestRapidModel (model_rapid_test.go) on
// PostgreSQL, with what only a database that runs writers side by side
// can show (issue 36, item 8): two or three consumer processes running at
// once on one database, copies of one identity with other payloads racing
// each other across processes, two events of other ids and other
// partition keys but one business key delivered at the same instant, and
// slow, live Decide and ledger calls that outlive many heartbeats while
// copies of their event are delivered to other processes.
//
// Why not a synctest bubble, as on SQLite: a goroutine waiting for
// PostgreSQL waits on the network, which is not "durably blocking", so
// synctest.Wait cannot tell a process waiting for the server from an idle
// one, and the bubble's fake clock would jump while a statement runs (a
// heartbeat's renewal "late" by minutes); pgx's and database/sql's
// goroutines started inside a bubble would also belong to it. So this
// world runs on the real clock with the agent path's timing scaled down
// (pgTiming: a 200 ms heartbeat, so a claim or a ledger lease lives
// 600 ms without one; Decide's timeout 6 s), and never waits for
// quiescence: the test's steps are real sleeps, the remote side's calls
// wait on channels the test answers, and each check reads the database
// in one REPEATABLE READ transaction (the store's tables and the queue's
// in one consistent snapshot), so the invariants that read the database
// (model_rapid_check_test.go) hold at any instant, not only when every
// goroutine is blocked. The invariants that hold at the moment the agent
// or the remote side is asked are checked there (agentLog.begin,
// remote.call), as on SQLite.
//
// Each process (a slot) consumes a queue of its own in the embedded
// queue on PostgreSQL (as members of a consumer group own partitions), so
// the test chooses which process a copy goes to: a racing copy, or the
// other half of a business-key pair, lands in another process than its
// twin, and a key's events go to any process (it found one key's turn
// taken in two processes at once: one_turn_per_key_postgres_test.go). The
// queue is in the store's schema (its ack commits with the inbox) or in
// another schema (acked after the commit), drawn per run.
//
// Run it (SEQBOX_TEST_POSTGRES_URL set; source /tmp/pgenv.sh or
// eval "$(.ci/postgres-start)"):
//
//	go test -run TestRapidModelPostgres -count=1 .
//
// It runs 3 checks of about 20 steps by default, sized for CI (40 s to
// 90 s on two busy cores); RAPID_CHECKS / RAPID_STEPS (or -rapid.checks /
// -rapid.steps) run more. Without the variable it skips, and with CI=true
// it fails (pgtest.BaseURL). A failure prints the seed, the shrunk
// actions and the run's log; the real clock and the processes running at
// once make a replay (-rapid.seed=SEED) take another path more often than
// on SQLite, which is why the log goes in the failure message.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/transport/embedded"
)

// pgTiming is the agent path's timing on the real clock: a claim or a
// ledger lease lives three heartbeats (600 ms) without renewal, and a
// copy that meets a live claim comes back after max(3 heartbeats,
// DecideTimeout/8) = 750 ms.
var pgTiming = rTiming{heartbeat: 200 * time.Millisecond, decide: 6 * time.Second, ledger: 5 * time.Second,
	backoff: 200 * time.Millisecond, maxBackoff: 1600 * time.Millisecond}

// pgHoldTimeout is how long a held event waits for its predecessor.
const pgHoldTimeout = 6 * time.Second

// pgDrain bounds the final drain, in real time.
const pgDrain = 60 * time.Second

func TestRapidModelPostgres(t *testing.T) {
	pgtest.BaseURL(t) // skips without a server, fails in CI
	rapidDefault(t, "rapid.checks", "RAPID_CHECKS", "3")
	rapidDefault(t, "rapid.steps", "RAPID_STEPS", "20")
	rapidDefault(t, "rapid.nofailfile", "RAPID_NOFAILFILE", "true")
	defer rapidEpoch.Store(nil)
	rapid.Check(t, func(rt *rapid.T) {
		cfg := rConfig{
			firstVersion: rapid.Bool().Draw(rt, "firstVersion"),
			releaseDL:    rapid.Bool().Draw(rt, "releaseOnDeadLetter"),
			holdAdvance:  rapid.Bool().Draw(rt, "holdExpiryAdvance"),
			maxAttempts:  rapid.IntRange(2, 4).Draw(rt, "maxAttempts"),
			workers:      rapid.IntRange(1, 3).Draw(rt, "workers"),
			batch:        rapid.IntRange(1, 4).Draw(rt, "batchSize"),
			sharedQueue:  rapid.Bool().Draw(rt, "sharedQueue"),
			lease:        rapid.SampledFrom([]time.Duration{2 * time.Second, 6 * time.Second}).Draw(rt, "lease"),
			extend:       rapid.Bool().Draw(rt, "extendLeases"),
			holdTimeout:  pgHoldTimeout,
			slowCommit:   rapid.SampledFrom([]time.Duration{0, 75 * time.Millisecond, 75 * time.Millisecond}).Draw(rt, "slowCommit"),
		}
		slots := rapid.IntRange(2, 3).Draw(rt, "processes")
		epoch := time.Now()
		events := scenario(rapid.IntRange(2, 3).Draw(rt, "eventsPerKey"), rapid.Bool().Draw(rt, "poison"), 3, epoch, 2500*time.Millisecond)
		cfg.maxAge = rapid.SampledFrom([]time.Duration{0, 0, 4 * time.Second}).Draw(rt, "maxAge")
		cfg.noDecide = rapid.IntRange(0, 2).Draw(rt, "noDecide") == 0
		rapidEpoch.Store(&epoch)
		runModelPG(rt, t, cfg, slots, events)
	})
}

// newPGWorld opens a run's database: a schema of its own for the store
// (and one more for the queue unless it shares the store's), the apply
// log, and a publisher per slot's queue.
func newPGWorld(ctx context.Context, tb testing.TB, cfg rConfig, slots int, events []*rEvent) (*world, error) {
	w := &world{cfg: cfg, events: events, byID: map[string]*rEvent{}, published: make([]int, len(events)), delivered: make([]int, len(events)),
		pubHashes: map[string]map[string]bool{}, remote: newRemote(), agent: newAgentLog(), pg: true,
		slots: make([]*process, slots)}
	for _, e := range events {
		w.byID[e.id] = e
	}
	w.pgURL, w.qURL, w.qTable = pgtest.URL(tb), "", "seqbox_queue"
	if cfg.sharedQueue {
		w.qURL = w.pgURL
	} else {
		w.qURL = pgtest.URL(tb)
		schema, err := pgdb.SchemaOf(w.qURL)
		if err != nil {
			return nil, err
		}
		w.qTable = pgdb.QuoteIdent(schema) + ".seqbox_queue"
	}
	var err error
	if w.st, err = postgres.Open(ctx, w.pgURL); err != nil {
		return nil, err
	}
	if err := w.createApplyLog(ctx); err != nil {
		return nil, err
	}
	for i := range slots {
		q, err := embedded.Open(ctx, w.qURL, w.queueConfigFor(i))
		if err != nil {
			return nil, err
		}
		w.pubs = append(w.pubs, q)
	}
	return w, nil
}

// closePG stops every process and closes every connection.
func (w *world) closePG() {
	for _, p := range w.slots {
		if p != nil {
			w.kill(p, "end of run")
		}
	}
	for _, q := range w.pubs {
		q.Close()
	}
	if w.st != nil {
		w.st.Close()
	}
}

// runModelPG is one run on PostgreSQL, on the real clock.
func runModelPG(t *rapid.T, tb testing.TB, cfg rConfig, nslots int, events []*rEvent) {
	ctx := context.Background()
	w, err := newPGWorld(ctx, tb, cfg, nslots, events)
	if w != nil {
		defer w.closePG()
	}
	if err != nil {
		t.Fatal(err)
	}
	w.step(t, "config: %s processes=%d slowCommit=%s; events: %v", cfg, nslots, cfg.slowCommit, events)

	// live is the process in slot, started (again) if it died.
	live := func(t *rapid.T, slot int) *process {
		if p := w.slots[slot]; p != nil && p.dead.Load() {
			if err := w.reap(p); err != nil {
				t.Fatal(err)
			}
		}
		if w.slots[slot] == nil {
			if _, err := w.startIn(ctx, slot); err != nil {
				t.Fatal(err)
			}
		}
		return w.slots[slot]
	}
	liveAll := func(t *rapid.T) {
		for i := range w.slots {
			live(t, i)
		}
	}
	liveAll(t)
	// real sleeps: the processes run meanwhile.
	run := func(d time.Duration) { time.Sleep(d) }
	slotOf := func(t *rapid.T, label string) int { return rapid.IntRange(0, nslots-1).Draw(t, label) }
	otherSlot := func(t *rapid.T, than int, label string) int {
		return (than + 1 + rapid.IntRange(0, nslots-2).Draw(t, label)) % nslots
	}
	payload := func(t *rapid.T, e *rEvent, label string) bool {
		return rapid.IntRange(0, 2).Draw(t, label) == 0
	}
	pub := func(t *rapid.T, e *rEvent, other bool, slot int) {
		if err := w.publishTo(ctx, w.pubs[slot], e, other); err != nil {
			t.Fatal(err)
		}
	}
	hashOf := func(e *rEvent, other bool) string {
		if other {
			return e.hashName(e.otherHash)
		}
		return e.hashName(e.hash)
	}

	dlqSeqs := func(t *rapid.T, query string) []int64 {
		var seqs []int64
		rows, err := w.st.DB().QueryContext(ctx, query, rapidConsumer)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s int64
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, s)
		}
		return seqs
	}
	deadLetters := func(t *rapid.T) []int64 {
		return dlqSeqs(t, `SELECT seq FROM seqbox_dlq WHERE consumer = $1 AND state = 'open' ORDER BY seq`)
	}
	redrivesInProgress := func(t *rapid.T) []int64 {
		return dlqSeqs(t, `SELECT d.seq FROM seqbox_dlq d JOIN seqbox_retries r
			ON r.consumer = d.consumer AND r.source = d.source AND r.id = d.id
			WHERE d.consumer = $1 AND d.state = 'open' ORDER BY d.seq`)
	}

	check := func(t *rapid.T) {
		for _, p := range w.slots {
			if p != nil && p.dead.Load() {
				if err := w.reap(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		w.flushTrace(t)
		s, err := w.read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bad := w.agent.takeViolations()
		if w.hot.Load() {
			bad = append(bad, fmt.Sprintf("no hot loop: %d outcomes between two steps", hotLoop))
		}
		w.outcomes.Store(0)
		bad = append(bad, w.check(s)...)
		if len(bad) > 0 {
			t.Fatalf("invariants broken at %s:\n  %s\n  the state:\n    %s\n  the run so far (its end):\n    %s", fakeNow(), joinLines(bad), w.describe(s), w.recent(150))
		}
	}

	t.Repeat(map[string]func(*rapid.T){
		"": check,
		// A producer publishes a copy of an event, with its payload or
		// another one under the same id, to one process's queue.
		"publish": func(t *rapid.T) {
			e := rapid.SampledFrom(w.events).Draw(t, "event")
			other := payload(t, e, "otherPayload")
			slot := slotOf(t, "slot")
			pub(t, e, other, slot)
			w.step(t, "publish %s, %s, to P-slot %d (copy %d)", e, hashOf(e, other), slot, w.published[e.idx])
			run(100 * time.Millisecond)
		},
		// Two copies of one identity at once, to two processes: the same
		// payload, or two payloads racing (the one the agent receives
		// applies, the other is a collision).
		"race": func(t *rapid.T) {
			e := rapid.SampledFrom(w.events).Draw(t, "event")
			o1, o2 := payload(t, e, "payload1"), rapid.Bool().Draw(t, "payload2Other")
			s1 := slotOf(t, "slot1")
			s2 := otherSlot(t, s1, "slot2")
			pub(t, e, o1, s1)
			pub(t, e, o2, s2)
			w.step(t, "race: %s, %s to slot %d and %s to slot %d at once", e, hashOf(e, o1), s1, hashOf(e, o2), s2)
			run(rapid.SampledFrom([]time.Duration{300 * time.Millisecond, time.Second}).Draw(t, "for"))
		},
		// Two events of other ids and other partition keys but one
		// business key, at the same instant, to two processes (or one):
		// the business key reaches the agent once.
		"pair": func(t *rapid.T) {
			i := rapid.IntRange(1, 3).Draw(t, "pair")
			a, b := w.byID[fmt.Sprintf("bx%d-a", i)], w.byID[fmt.Sprintf("bx%d-b", i)]
			s1 := slotOf(t, "slotA")
			s2 := s1
			if rapid.IntRange(0, 3).Draw(t, "sameProcess") != 0 {
				s2 = otherSlot(t, s1, "slotB")
			}
			if err := w.pubs[s1].PublishBatch(ctx, [][]byte{a.body}); err != nil {
				t.Fatal(err)
			}
			if err := w.pubs[s2].PublishBatch(ctx, [][]byte{b.body}); err != nil {
				t.Fatal(err)
			}
			w.published[a.idx]++
			w.published[b.idx]++
			w.published1(a, false)
			w.published1(b, false)
			w.step(t, "pair: %s to slot %d and %s to slot %d at the same instant (business key %s)", a, s1, b, s2, a.bk)
			run(rapid.SampledFrom([]time.Duration{300 * time.Millisecond, time.Second}).Draw(t, "for"))
		},
		// The processes run for a while.
		"run": func(t *rapid.T) {
			d := rapid.SampledFrom([]time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second}).Draw(t, "for")
			w.step(t, "the processes run for %s", d)
			run(d)
		},
		// A slow, live call: while the remote side holds a call (its
		// Decide and its ledger row stay in flight, many heartbeats
		// long), a copy of its event goes to another process. The claim
		// and the ledger lease, renewed by a live heartbeat, keep that
		// copy from asking the model and calling again.
		"slow": func(t *rapid.T) {
			var calls []*remoteCall
			for _, c := range w.remote.waiting() {
				if !c.proc.dead.Load() {
					calls = append(calls, c)
				}
			}
			if len(calls) == 0 {
				t.Skip("no call waiting in a live process")
			}
			c := rapid.SampledFrom(calls).Draw(t, "call")
			other := payload(t, c.ev, "otherPayload")
			slot := otherSlot(t, c.proc.slot, "slot")
			pub(t, c.ev, other, slot)
			d := rapid.SampledFrom([]time.Duration{1500 * time.Millisecond, 2500 * time.Millisecond}).Draw(t, "for")
			w.step(t, "slow call: remote holds %s #%d (%s) while a copy, %s, goes to slot %d; %s pass (%d heartbeats)",
				c.ev, c.seq, c.proc, hashOf(c.ev, other), slot, d, d/pgTiming.heartbeat)
			run(d)
		},
		// The handler of a consumer without Decide fails its next runs
		// of an event.
		"fail": func(t *rapid.T) { failAction(t, w) },
		// The remote side answers a waiting call.
		"answer": func(t *rapid.T) {
			calls := w.remote.waiting()
			if len(calls) == 0 {
				t.Skip("no call waiting")
			}
			c := rapid.SampledFrom(calls).Draw(t, "call")
			a := rapid.SampledFrom([]answer{ansOK, ansOK, ansOK, ansTransient, ansThrottled, ansLost, ansRedirect, ansRefuse}).Draw(t, "answer")
			w.step(t, "remote answers %s #%d (%s): %s", c.ev, c.seq, c.proc, a)
			w.remote.answerCall(c, a)
			run(100 * time.Millisecond)
		},
		// SIGKILL of one process; a new one starts in its slot.
		"crash": func(t *rapid.T) {
			slot := slotOf(t, "slot")
			p := live(t, slot)
			applied := rapid.Bool().Draw(t, "callsInFlightApplied")
			w.remote.mu.Lock()
			w.remote.abandonApplies = applied
			w.remote.mu.Unlock()
			w.step(t, "kill %s (remote calls in flight applied: %v)", p, applied)
			w.kill(p, "crash action")
			live(t, slot)
		},
		// One process will die the n-th time it reaches a fault point.
		"arm": func(t *rapid.T) {
			p := live(t, slotOf(t, "slot"))
			pt := rapid.SampledFrom(crashPoints).Draw(t, "point")
			n := rapid.IntRange(1, 3).Draw(t, "nth")
			w.step(t, "%s will crash at %s (passage %d)", p, pt, n)
			p.arm(pt, n)
			run(200 * time.Millisecond)
		},
		// An operator redrives a dead letter in one process.
		"redrive": func(t *rapid.T) {
			seqs := deadLetters(t)
			if len(seqs) == 0 {
				t.Skip("no open dead letter")
			}
			seq := rapid.SampledFrom(seqs).Draw(t, "dlq")
			if rapid.Bool().Draw(t, "fixPoison") {
				w.fixed.Store(true)
			}
			p := live(t, slotOf(t, "slot"))
			var id string
			if err := w.st.DB().QueryRowContext(ctx, `SELECT id FROM seqbox_dlq WHERE seq = $1`, seq).Scan(&id); err != nil {
				t.Fatal(err)
			}
			w.agent.redrive(id)
			w.step(t, "operator redrives dlq %d (%s) in %s (poison fixed: %v)", seq, id, p, w.fixed.Load())
			w.operator(p, fmt.Sprintf("redrive %d", seq), func(ctx context.Context) ([]seqboxtype.Result, error) { return p.c.Redrive(ctx, seq) })
			run(200 * time.Millisecond)
		},
		// An operator skips a dead letter.
		"skip": func(t *rapid.T) {
			seqs := deadLetters(t)
			if len(seqs) == 0 {
				t.Skip("no open dead letter")
			}
			seq := rapid.SampledFrom(seqs).Draw(t, "dlq")
			p := live(t, slotOf(t, "slot"))
			w.step(t, "operator skips dlq %d in %s", seq, p)
			w.operator(p, fmt.Sprintf("skip %d", seq), func(ctx context.Context) ([]seqboxtype.Result, error) {
				return p.c.Skip(ctx, seq, "rapid", "operator skip")
			})
			run(200 * time.Millisecond)
		},
		// An operator releases a key blocked by a gap.
		"release": func(t *rapid.T) {
			var keys []string
			for _, k := range []string{"k0", "k1", "ka1", "kb1", "ka2", "kb2", "ka3", "kb3"} {
				var blocked int
				var by string
				err := w.st.DB().QueryRowContext(ctx, `SELECT blocked, blocked_id FROM seqbox_keys WHERE consumer = $1 AND partitionkey = $2`,
					rapidConsumer, k).Scan(&blocked, &by)
				if err == nil && blocked != 0 && by == "" {
					keys = append(keys, k)
				}
			}
			if len(keys) == 0 {
				t.Skip("no key blocked by a gap")
			}
			k := rapid.SampledFrom(keys).Draw(t, "key")
			p := live(t, slotOf(t, "slot"))
			w.step(t, "operator releases %s in %s", k, p)
			w.operator(p, "release "+k, func(ctx context.Context) ([]seqboxtype.Result, error) {
				return p.c.ReleaseKey(ctx, k, "rapid", "operator release")
			})
			run(200 * time.Millisecond)
		},
	})

	// The end: crashes off, the remote side answers every call at once,
	// every event published, and the processes run until everything
	// settles. Nothing may be lost.
	w.noCrash.Store(true)
	w.remote.mu.Lock()
	w.remote.auto = ansOK
	w.remote.abandonApplies = false
	w.remote.mu.Unlock()
	for _, c := range w.remote.waiting() {
		w.remote.answerCall(c, ansOK)
	}
	for _, e := range w.events {
		if w.published[e.idx] == 0 {
			pub(t, e, false, e.idx%nslots)
		}
	}
	w.step(t, "drain: every event published, the remote side answers ok")
	liveAll(t)
	var left []string
	var last *snapshot
	deadline := time.Now().Add(pgDrain)
	for time.Now().Before(deadline) {
		run(300 * time.Millisecond)
		for _, seq := range redrivesInProgress(t) {
			p := live(t, 0)
			w.step(t, "operator redrives dlq %d again in %s", seq, p)
			w.operator(p, fmt.Sprintf("redrive %d", seq), func(ctx context.Context) ([]seqboxtype.Result, error) { return p.c.Redrive(ctx, seq) })
			run(300 * time.Millisecond)
		}
		check(t)
		liveAll(t)
		s, err := w.read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last = s
		if left = w.stillMoving(s); len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Fatalf("nothing lost: after a drain of %s these have no final outcome and are not parked behind a blocked key:\n  %s\n  the state:\n    %s\n  the run so far (its end):\n    %s",
			pgDrain, joinLines(left), w.describe(last), w.recent(150))
	}
	if bad := w.quietCheck(last); len(bad) > 0 {
		t.Fatalf("invariants broken once settled:\n  %s\n  the state:\n    %s\n  the run so far (its end):\n    %s", joinLines(bad), w.describe(last), w.recent(150))
	}
	w.step(t, "settled")
}
