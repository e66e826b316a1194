package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport/embedded"
)

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
	if err := s.publish(ctx, bodies); err != nil {
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
	if err := s.publish(ctx, bodies); err != nil {
		return err
	}
	return s.supervise(ctx, "phase 2")
}

// publish publishes bodies as a producer does: a failure the broker may
// recover from (a stream that does not answer yet, under load) is tried
// again, a few times, after a pause. A retry may store some messages
// twice; the inbox absorbs the copies, which is what is under test.
func (s *scenarioRun) publish(ctx context.Context, bodies [][]byte) error {
	const attempts = 5
	for attempt := 1; ; attempt++ {
		err := s.q.PublishBatch(ctx, bodies)
		if err == nil || attempt == attempts || ctx.Err() != nil {
			return err
		}
		s.h.progress("%s: publishing failed (attempt %d of %d), trying again: %v", s.name, attempt, attempts, err)
		select {
		case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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
		if err == nil {
			s.h.report(s.name, phase, ready+leased, s.kills)
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
				// Every live consumer still holds its lock on a SQLite
				// file (docs/design.md §15.1).
				for _, why := range unlocked(s.db, readyWorkers(s.procs)) {
					s.res.fail("%s: %s", phase, why)
				}
				s.h.progress("%s: %s drained in %s (kills so far %d)", s.name, phase, time.Since(phaseStart).Round(time.Millisecond), s.kills)
				return nil
			}
		default:
			emptySince = time.Time{}
		}
		time.Sleep(25 * time.Millisecond)
	}
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
