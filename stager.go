package seqbox

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
	"go.opentelemetry.io/otel/trace"
)

// decideGrace is how long a stage gathers finished decisions before it
// commits them, leaving the slow ones (a model call of a minute) for later
// transactions.
const decideGrace = 50 * time.Millisecond

// rerun is the input that runs an undecided message again once decided: the
// same delivery, or its key's unparking for a message let out of the parked
// table (unparking takes it under the key's lock if it is still next).
func (u *undecided) rerun() input {
	if u.in.parkedRow() != nil {
		return input{kind: unparking{key: u.ev.PartitionKey, decided: store.Identity{Source: u.ev.Source, ID: u.ev.ID}}, decideErr: u.in.decideErr}
	}
	return u.in
}

// decideAndApply decides undecided messages outside any transaction and
// runs each again once decided, in stages: those decided within
// decideGrace of each other commit together. A run may let out its key's
// next message, which is decided in turn, and so on until nothing is left
// to decide. unpin, when set, is told each key as soon as nothing of it is
// left. It returns the results each origin reached, in order.
func (c *Consumer) decideAndApply(ctx context.Context, us []undecided, unpin func(keys []string)) (map[int][]seqboxtype.Result, error) {
	out := map[int][]seqboxtype.Result{}
	st := newStager(ctx, c)
	defer st.wait()
	st.add(us)
	for stage := st.next(); stage != nil; stage = st.next() {
		ds := make([]transport.Delivery, len(stage))
		ins := make([]input, len(stage))
		keys := make([]string, len(stage))
		for j, u := range stage {
			ds[j], ins[j], keys[j] = u.delivery, u.rerun(), u.key
		}
		res, more, err := c.commitAndSettle(ctx, ds, ins, keys)
		if err != nil {
			return out, err
		}
		for j, u := range stage {
			out[u.origin] = append(out[u.origin], final(res[j])...)
		}
		for i := range more {
			more[i].origin = stage[more[i].origin].origin
		}
		st.add(more)
		if unpin != nil {
			var done []string
			for _, u := range stage {
				if !st.waiting(u.key) {
					done = append(done, u.key)
				}
			}
			unpin(done)
		}
	}
	return out, ctx.Err()
}

// final drops the results that are not outcomes: a message stopped to be
// decided reaches its outcome in a later run.
func final(results []seqboxtype.Result) []seqboxtype.Result {
	if !slices.ContainsFunc(results, func(res seqboxtype.Result) bool { return res.Outcome == outcomeDeciding }) {
		return results // the usual case, on every batch's path: no copy
	}
	out := results[:0:0]
	for _, res := range results {
		if res.Outcome != outcomeDeciding {
			out = append(out, res)
		}
	}
	return out
}

// stager decides messages concurrently and hands them out in stages as
// their decisions come in. A key's messages never overtake each other: one
// waits for every earlier one of its key. A stager of one call
// (decideAndApply) ends once nothing is left; a long-lived one (Run's
// decidePipe) waits for more.
type stager struct {
	ctx context.Context
	c   *Consumer
	// live: wait for more once nothing is left, and hand out what is
	// ready at once (the pipe's one applier gathers what comes in while
	// it commits).
	live bool
	mu   sync.Mutex
	// pending are the messages not handed out yet, in order of addition;
	// undecided counts those whose decision is still being asked.
	pending   []*stageItem
	undecided int
	// perKey counts the pending messages of each key.
	perKey map[string]int
	// blocked is next's and readyLocked's scratch set of the keys
	// behind an undecided message, cleared and reused under mu: a map
	// made at each call was the agent path's largest allocation of its
	// own.
	blocked map[string]bool
	notify  chan struct{}
	wg      sync.WaitGroup
}

// stageItem is one message in a stager; decided once its Decide is
// through (or it had nothing to decide).
type stageItem struct {
	u       undecided
	decided bool
	// copies are the later copies of its identity added with it, which
	// share its decision (add).
	copies []*stageItem
}

func newStager(ctx context.Context, c *Consumer) *stager {
	return &stager{ctx: ctx, c: c, notify: make(chan struct{}, 1), perKey: map[string]int{}}
}

// add starts deciding us.
func (st *stager) add(us []undecided) {
	if len(us) == 0 {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	// Copies of one identity added together (a batch's) share the first
	// one's decision, as the decider shares a call in flight with a copy
	// that asks meanwhile: here whatever the scheduling, so that a copy
	// never asks again after its twin's call failed
	// (TestCopiesInABatchShareOneDecision).
	first := map[store.Identity]*stageItem{}
	for _, u := range us {
		it := &stageItem{u: u}
		st.pending = append(st.pending, it)
		st.perKey[u.key]++
		if u.after {
			// Nothing to decide: it goes with or after its predecessor.
			it.decided = true
			continue
		}
		st.undecided++
		id := store.Identity{Source: u.ev.Source, ID: u.ev.ID}
		if f := first[id]; f != nil {
			f.copies = append(f.copies, it)
			continue
		}
		first[id] = it
		st.wg.Go(func() {
			err := st.c.decider.decide(trace.ContextWithSpanContext(st.ctx, it.u.span), it.u.ev, it.u.claim)
			st.mu.Lock()
			it.u.in.decideErr = err
			it.decided = true
			st.undecided--
			for _, cp := range it.copies {
				cp.u.in.decideErr = copyDecision(err)
				cp.decided = true
				st.undecided--
			}
			st.mu.Unlock()
			st.wake()
		})
	}
	st.wake()
}

// copyDecision is what a copy that shared a decision learns of it: as
// the decider tells a copy that waited for a call in flight, a failure
// is the first copy's, and the copy waits to be redelivered without an
// attempt of its own.
func copyDecision(err error) error {
	if err != nil {
		return &decisionInFlight{wait: minDecisionWait}
	}
	return nil
}

// wake tells next that something changed.
func (st *stager) wake() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

// next blocks until some messages may run again and returns them, or nil
// once none is left (a stager of one call) or the context ended.
func (st *stager) next() []undecided {
	for {
		st.mu.Lock()
		if len(st.pending) == 0 && !st.live {
			st.mu.Unlock()
			return nil
		}
		ready := st.readyLocked()
		st.mu.Unlock()
		if !ready {
			select {
			case <-st.notify:
			case <-st.ctx.Done():
				return nil
			}
			continue
		}
		if !st.live {
			st.gather()
		}
		st.mu.Lock()
		var stage []undecided
		// What stays pending is kept in place, in order: each kept item
		// moves to an index at or below its own.
		rest := st.pending[:0]
		blocked := st.scratch()
		for _, it := range st.pending {
			if !it.decided || blocked[it.u.key] {
				blocked[it.u.key] = true
				rest = append(rest, it)
				continue
			}
			stage = append(stage, it.u)
			if st.perKey[it.u.key]--; st.perKey[it.u.key] == 0 {
				delete(st.perKey, it.u.key)
			}
		}
		clear(st.pending[len(rest):]) // the items handed out, not kept alive
		st.pending = rest
		st.mu.Unlock()
		if len(stage) > 0 {
			return stage
		}
	}
}

// gather waits, once one message is in, for the others that come in
// within decideGrace, so that they commit together.
func (st *stager) gather() {
	timer := time.NewTimer(decideGrace)
	defer timer.Stop()
	for {
		st.mu.Lock()
		all := st.undecided == 0
		st.mu.Unlock()
		if all {
			return
		}
		select {
		case <-st.notify:
		case <-timer.C:
			return
		case <-st.ctx.Done():
			return
		}
	}
}

// readyLocked reports whether some pending message is decided and not
// behind an undecided one of its key.
func (st *stager) readyLocked() bool {
	blocked := st.scratch()
	for _, it := range st.pending {
		if it.decided && !blocked[it.u.key] {
			return true
		}
		blocked[it.u.key] = true
	}
	return false
}

// scratch returns the stager's set of blocked keys, empty; st.mu is
// held.
func (st *stager) scratch() map[string]bool {
	if st.blocked == nil {
		st.blocked = map[string]bool{}
	}
	clear(st.blocked)
	return st.blocked
}

// waiting reports whether a key still has messages not handed out.
func (st *stager) waiting(key string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.perKey[key] > 0
}

// wait waits for every decision goroutine.
func (st *stager) wait() { st.wg.Wait() }
