package seqbox_test

// TestRapidModel checks the implementation against the protocol model
// (issue 19, item 4): a randomized state machine (pgregory.net/rapid) drives
// the REAL library through the model's actions and checks the model's
// invariants against what the database, the queue and a fake remote side
// show after every step.
//
// Real components: a SQLite store file, the embedded durable queue (in the
// store's file or a file of its own, drawn per run), consumers with
// Config.Decide running Consumer.Run, an effects.Ledger guarding every
// remote call, and a Reconcile that looks the idempotency key up at the
// fake remote side (model_rapid_world_test.go). The invariants are in
// model_rapid_check_test.go and, for the ones that hold at the moment the
// agent is asked, in agentLog.begin.
//
// Time: each rapid run is one testing/synctest bubble (rapid.SyncTest), so
// leases, backoffs, claim and ledger heartbeats, holds and timeouts run on
// the bubble's fake clock. Nothing had to move out of the bubble: SQLite
// (modernc.org/sqlite, pure Go, no goroutines of its own; database/sql's
// opener goroutine blocks on a channel of the bubble) runs inside it, and
// its I/O is not "durably blocking", so the clock never moves while a
// statement runs. Every component reads one clock through the knobs the
// library exposes (seqbox.Config.Now, embedded.Config.Now,
// effects.Config.Now): the bubble's time itself (frozenClock: every
// reading of an instant equal, as under a fixed Now or clocks a little
// apart on two machines) or that time made strictly increasing by a
// microsecond per reading, as a real clock is; the run draws which. The
// test never sleeps for synchronisation: synctest.Wait lets every
// goroutine run until it blocks, and time.Sleep in the bubble's root
// goroutine is how the fake clock is moved by a chosen amount (no
// wall-clock time passes; a "hot loop" invariant catches a livelock that
// would keep the fake clock from moving).
//
// Crashes: a process is killed where it stands (its context cancelled
// with fault.ErrCrash as the cause, so Run settles nothing at the broker,
// and every remote call in flight ends its goroutine with runtime.Goexit,
// so the ledger never hears the answer and its row stays pending), or at
// an armed fault point of the engine (own.Options.Hook: after the decision
// claim, before/after commit, mid-batch, during a redrive, ...). Either
// way a NEW consumer with its own store and queue connections is opened
// on the same files. (One difference from SIGKILL remains: a decider
// unwound by Goexit still releases its decision claim in a defer, so the
// claim's takeover is immediate instead of after three heartbeats; the
// after_decision_claim fault point covers a claim left behind.)
//
// Run it:
//
//	go test -run TestRapidModel -count=1 .
//
// It runs 40 checks of about 30 steps by default (set -rapid.checks /
// -rapid.steps, or RAPID_CHECKS / RAPID_STEPS, to change that), with
// GOMAXPROCS 1 while it runs and no fail file written (-rapid.nofailfile
// defaults to true here; pass -rapid.nofailfile=false to get one under
// testdata/rapid). On a failure rapid shrinks the sequence of actions and
// prints it, the seed and the failing run's log (the end of it is also in
// the failure message itself); replay it with
//
//	go test -run TestRapidModel -count=1 . -rapid.seed=SEED
//
// -rapid.v prints every run's actions. The bubble's goroutines are still
// scheduled by the runtime, so a replay can take another path: rapid then
// says "flaky test, can not reproduce a failure" and prints the original
// failure with its log, which is why the log goes in the message.
//
// The library bugs it found are each a deterministic test in
// model_rapid_found_test.go.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/seqboxtype"
)

// commandLineFlags are the flags the command line set, read once before
// any test sets one (rapidDefault): flag.Visit afterwards also lists those
// a test set and put back, and a later test's default was then ignored
// (TestRapidModelPostgres ran rapid's 100 checks after another test's 40).
var commandLineFlags = sync.OnceValue(func() map[string]bool {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
})

// rapidDefault sets one of rapid's flags for this test unless the command
// line or the environment chose it.
func rapidDefault(t *testing.T, name, env, value string) {
	if _, ok := os.LookupEnv(env); ok {
		return
	}
	f := flag.Lookup(name)
	if commandLineFlags()[name] || f == nil {
		return
	}
	old := f.Value.String()
	if err := flag.Set(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set(name, old) })
}

// crashPoints are the engine's fault points a process can be armed to die
// at.
var crashPoints = []fault.Point{
	fault.BeforeTx, fault.AfterInboxInsert, fault.AfterHandler, fault.BeforeCommit, fault.AfterCommit,
	fault.MidBatch, fault.AfterDecisionClaim, fault.DuringRedrive, fault.DuringLeaseExtend,
}

func TestRapidModel(t *testing.T) {
	rapidDefault(t, "rapid.checks", "RAPID_CHECKS", "40")
	rapidDefault(t, "rapid.nofailfile", "RAPID_NOFAILFILE", "true")
	// One P: fewer interleavings to tell apart when rapid replays a
	// failure to shrink it (the bubble is not deterministic otherwise).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	base := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		cfg := rConfig{
			firstVersion: rapid.Bool().Draw(rt, "firstVersion"),
			releaseDL:    rapid.Bool().Draw(rt, "releaseOnDeadLetter"),
			holdAdvance:  rapid.Bool().Draw(rt, "holdExpiryAdvance"),
			maxAttempts:  rapid.IntRange(2, 4).Draw(rt, "maxAttempts"),
			workers:      rapid.IntRange(1, 3).Draw(rt, "workers"),
			batch:        rapid.IntRange(1, 4).Draw(rt, "batchSize"),
			sharedQueue:  rapid.Bool().Draw(rt, "sharedQueue"),
			lease:        rapid.SampledFrom([]time.Duration{5 * time.Second, 30 * time.Second}).Draw(rt, "lease"),
			extend:       rapid.Bool().Draw(rt, "extendLeases"),
			frozenClock:  rapid.Bool().Draw(rt, "frozenClock"),
			holdTimeout:  rHoldTimeout,
		}
		events := scenario(rapid.IntRange(2, 3).Draw(rt, "eventsPerKey"), rapid.Bool().Draw(rt, "poison"), rapid.IntRange(0, 1).Draw(rt, "businessKeyPairs"), bubbleStart, 25*time.Second)
		cfg.maxAge = rapid.SampledFrom([]time.Duration{0, 0, 40 * time.Second}).Draw(rt, "maxAge")
		cfg.noDecide = rapid.IntRange(0, 2).Draw(rt, "noDecide") == 0
		dir, err := os.MkdirTemp(base, "run")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		rapid.SyncTest(rt, func(t *rapid.T) { runModel(t, dir, cfg, events) })
	})
}

// runModel is one run, inside its bubble.
func runModel(t *rapid.T, dir string, cfg rConfig, events []*rEvent) {
	ctx := context.Background()
	w, err := newWorld(ctx, dir, cfg, events)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	w.step(t, "config: %s; events: %v", cfg, events)

	live := func(t *rapid.T) *process {
		if err := w.reapIfDone(); err != nil {
			t.Fatal(err)
		}
		if w.proc == nil {
			if _, err := w.start(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return w.proc
	}
	// dlqSeqs lists the consumer's DLQ sequence numbers query selects.
	dlqSeqs := func(query string) []int64 {
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
	deadLetters := func() []int64 {
		return dlqSeqs(`SELECT seq FROM seqbox_dlq WHERE consumer = $1 AND state = 'open' ORDER BY seq`)
	}
	// redrivesInProgress are the open dead letters whose identity holds a
	// turn: a redrive of them ended in a transient failure.
	redrivesInProgress := func() []int64 {
		return dlqSeqs(`SELECT d.seq FROM seqbox_dlq d JOIN seqbox_retries r
			ON r.consumer = d.consumer AND r.source = d.source AND r.id = d.id
			WHERE d.consumer = $1 AND d.state = 'open' ORDER BY d.seq`)
	}

	check := func(t *rapid.T) {
		quiesce()
		if err := w.reapIfDone(); err != nil {
			t.Fatal(err)
		}
		w.flushTrace(t)
		bad := w.agent.takeViolations()
		if w.hot.Load() {
			bad = append(bad, fmt.Sprintf("no hot loop: %d outcomes between two steps", hotLoop))
		}
		w.outcomes.Store(0)
		s, err := w.read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bad = append(bad, w.check(s)...)
		if len(bad) > 0 {
			t.Fatalf("invariants broken at %s:\n  %s\n  the run so far (its end):\n    %s", fakeNow(), joinLines(bad), w.recent(120))
		}
	}

	t.Repeat(map[string]func(*rapid.T){
		"": check,
		// A producer publishes an event, or publishes it again (a re-send:
		// same id, same payload).
		"publish": func(t *rapid.T) {
			e := rapid.SampledFrom(w.events).Draw(t, "event")
			// Now and then a copy under the same id with another
			// payload: it must end a collision unless it is the copy
			// the agent received.
			other := rapid.IntRange(0, 4).Draw(t, "otherPayload") == 0
			if err := w.publishTo(ctx, w.pub, e, other); err != nil {
				t.Fatal(err)
			}
			w.step(t, "publish %s, %s (copy %d)", e, e.hashName(map[bool]string{false: e.hash, true: e.otherHash}[other]), w.published[e.idx])
		},
		// A copy handed to the consumer directly (Consumer.Deliver, as an
		// application with a broker of its own does, redelivering it after
		// a retry) beside what Run receives: it runs outside Run's
		// scheduler, so it can meet a copy of its own event that Run is
		// deciding, as a copy another process received would.
		"deliver": func(t *rapid.T) {
			e := rapid.SampledFrom(w.events).Draw(t, "event")
			other := rapid.IntRange(0, 4).Draw(t, "otherPayload") == 0
			p := live(t)
			w.delivered[e.idx]++
			w.published1(e, other)
			w.step(t, "deliver %s, %s, to %s directly (copy %d)", e, e.hashName(map[bool]string{false: e.hash, true: e.otherHash}[other]), p, w.published[e.idx]+w.delivered[e.idx])
			d := &delivered{e: e, other: other}
			p.mu.Lock()
			if p.delivering == nil {
				p.delivering = map[*delivered]bool{}
			}
			p.delivering[d] = true
			p.mu.Unlock()
			w.operator(p, "deliver "+e.id, func(ctx context.Context) ([]seqboxtype.Result, error) {
				// As a broker redelivers: again after a retry, until the
				// copy has an outcome or its process dies (then reap puts
				// it back in the queue).
				for attempt := 1; ; attempt++ {
					res, err := p.c.Deliver(ctx, e.bodyOf(other), attempt)
					if ctx.Err() != nil {
						return res, err
					}
					if err != nil || len(res) == 0 || res[0].Outcome != seqboxtype.Retry {
						p.mu.Lock()
						delete(p.delivering, d)
						p.mu.Unlock()
						return res, err
					}
					select {
					case <-time.After(max(res[0].RetryAfter, rBackoff)):
					case <-ctx.Done():
						return res, ctx.Err()
					}
				}
			})
			advance(100 * time.Millisecond)
		},
		// The consumer runs for a moment: it receives what is ready and
		// processes it until it waits (for the remote side, a backoff, a
		// lease).
		"run": func(t *rapid.T) {
			p := live(t)
			d := rapid.SampledFrom([]time.Duration{300 * time.Millisecond, time.Second, 2 * time.Second}).Draw(t, "for")
			w.step(t, "%s runs for %s", p, d)
			advance(d)
		},
		// SIGKILL now: the process dies wherever it stands; a new one
		// starts on the same files.
		"crash": func(t *rapid.T) {
			if w.proc == nil {
				t.Skip("no live process")
			}
			applied := rapid.Bool().Draw(t, "callsInFlightApplied")
			w.remote.mu.Lock()
			w.remote.abandonApplies = applied
			w.remote.mu.Unlock()
			w.step(t, "kill %s (remote calls in flight applied: %v)", w.proc, applied)
			w.kill(w.proc, "crash action")
			live(t)
		},
		// The live process will die the n-th time it reaches a fault
		// point of the engine.
		"arm": func(t *rapid.T) {
			p := live(t)
			pt := rapid.SampledFrom(crashPoints).Draw(t, "point")
			n := rapid.IntRange(1, 3).Draw(t, "nth")
			w.step(t, "%s will crash at %s (passage %d)", p, pt, n)
			p.arm(pt, n)
			advance(300 * time.Millisecond)
		},
		// The handler of a consumer without Decide fails its next runs
		// of an event (a transient error: a retry, holding its key's
		// turn, then a dead letter once its attempts run out).
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
			advance(100 * time.Millisecond)
		},
		// Time passes: leases, backoffs, claims, ledger leases and
		// timeouts, holds.
		"advance": func(t *rapid.T) {
			d := rapid.SampledFrom([]time.Duration{time.Second, 3 * time.Second, 5 * time.Second, 11 * time.Second,
				21 * time.Second, 31 * time.Second, rHoldTimeout + time.Second}).Draw(t, "by")
			applied := rapid.Bool().Draw(t, "abandonedCallsApplied")
			w.remote.mu.Lock()
			w.remote.abandonApplies = applied
			w.remote.mu.Unlock()
			w.step(t, "time passes: %s (calls given up on applied: %v)", d, applied)
			advance(d)
		},
		// An operator redrives a dead letter (sometimes after fixing the
		// poison event's cause).
		"redrive": func(t *rapid.T) {
			seqs := deadLetters()
			if len(seqs) == 0 {
				t.Skip("no open dead letter")
			}
			seq := rapid.SampledFrom(seqs).Draw(t, "dlq")
			if rapid.Bool().Draw(t, "fixPoison") {
				w.fixed.Store(true)
			}
			p := live(t)
			var id string
			if err := w.st.DB().QueryRowContext(ctx, `SELECT id FROM seqbox_dlq WHERE seq = $1`, seq).Scan(&id); err != nil {
				t.Fatal(err)
			}
			w.agent.redrive(id)
			w.step(t, "operator redrives dlq %d (%s) in %s (poison fixed: %v)", seq, id, p, w.fixed.Load())
			w.operator(p, fmt.Sprintf("redrive %d", seq), func(ctx context.Context) ([]seqboxtype.Result, error) { return p.c.Redrive(ctx, seq) })
			advance(100 * time.Millisecond)
		},
		// An operator skips a dead letter.
		"skip": func(t *rapid.T) {
			seqs := deadLetters()
			if len(seqs) == 0 {
				t.Skip("no open dead letter")
			}
			seq := rapid.SampledFrom(seqs).Draw(t, "dlq")
			p := live(t)
			w.step(t, "operator skips dlq %d in %s", seq, p)
			w.operator(p, fmt.Sprintf("skip %d", seq), func(ctx context.Context) ([]seqboxtype.Result, error) {
				return p.c.Skip(ctx, seq, "rapid", "operator skip")
			})
			advance(100 * time.Millisecond)
		},
		// An operator releases a key blocked by a gap (a hold that timed
		// out with HoldExpiry=block).
		"release": func(t *rapid.T) {
			var keys []string
			for _, k := range []string{"k0", "k1"} {
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
			p := live(t)
			w.step(t, "operator releases %s in %s", k, p)
			w.operator(p, "release "+k, func(ctx context.Context) ([]seqboxtype.Result, error) {
				return p.c.ReleaseKey(ctx, k, "rapid", "operator release")
			})
			advance(100 * time.Millisecond)
		},
	})

	// The end: crashes off, the remote side answers every call at once,
	// every event published, and time runs until everything settles.
	// Nothing may be lost: every identity ends with a final outcome or
	// parked behind a blocked key.
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
			if err := w.publish(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.step(t, "drain: every event published, the remote side answers ok")
	live(t)
	var left []string
	var last *snapshot
	for range 80 {
		advance(5 * time.Second)
		// The operator finishes the redrives that ended in a transient
		// failure (as `seqbox dlq redrive` retries them): such a redrive
		// keeps its key's turn, and its attempts, until it is redriven
		// again or skipped.
		for _, seq := range redrivesInProgress() {
			p := live(t)
			w.step(t, "operator redrives dlq %d again in %s", seq, p)
			w.operator(p, fmt.Sprintf("redrive %d", seq), func(ctx context.Context) ([]seqboxtype.Result, error) { return p.c.Redrive(ctx, seq) })
		}
		check(t)
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
		t.Fatalf("nothing lost: after the drain (%s of fake time) these have no final outcome and are not parked behind a blocked key:\n  %s\n  the state:\n    %s\n  the run so far (its end):\n    %s",
			fakeNow(), joinLines(left), w.describe(last), w.recent(150))
	}
	if bad := w.quietCheck(last); len(bad) > 0 {
		t.Fatalf("invariants broken once settled:\n  %s\n  the state:\n    %s\n  the run so far (its end):\n    %s", joinLines(bad), w.describe(last), w.recent(150))
	}
	w.step(t, "settled")
}

func joinLines(s []string) string { return strings.Join(s, "\n  ") }

// failAction is the "fail" action: the handler of a consumer without
// Decide fails its next one or two runs of an event.
func failAction(t *rapid.T, w *world) {
	if !w.cfg.noDecide {
		t.Skip("the consumer has Decide")
	}
	e := rapid.SampledFrom(w.events).Draw(t, "event")
	n := rapid.IntRange(1, 2).Draw(t, "runs")
	w.step(t, "the handler will fail its next %d run(s) of %s", n, e)
	w.failHandler(e, n)
}
