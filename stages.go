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
	if u.in.parked != nil {
		return input{unparkKey: u.ev.PartitionKey, decided: store.Identity{Source: u.ev.Source, ID: u.ev.ID}, decideErr: u.in.decideErr}
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
func final(ds []seqboxtype.Result) []seqboxtype.Result {
	if !slices.ContainsFunc(ds, func(d seqboxtype.Result) bool { return d.Outcome == outcomeDeciding }) {
		return ds // the usual case, on every batch's path: no copy
	}
	out := ds[:0:0]
	for _, d := range ds {
		if d.Outcome != outcomeDeciding {
			out = append(out, d)
		}
	}
	return out
}

// stager decides messages concurrently and hands them out in stages as
// their decisions come in. A key's messages never overtake each other: one
// waits for every earlier one of its key.
type stager struct {
	ctx context.Context
	c   *Consumer
	mu  sync.Mutex
	// items are every message added; finished marks those decided;
	// pending are the indexes not handed out yet, in order of addition.
	items    []*undecided
	finished map[int]bool
	pending  []int
	notify   chan struct{}
	wg       sync.WaitGroup
}

func newStager(ctx context.Context, c *Consumer) *stager {
	return &stager{ctx: ctx, c: c, finished: map[int]bool{}, notify: make(chan struct{}, 1)}
}

// add starts deciding us.
func (st *stager) add(us []undecided) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, u := range us {
		i := len(st.items)
		it := u
		st.items = append(st.items, &it)
		st.pending = append(st.pending, i)
		if it.after {
			// Nothing to decide: it goes with or after its predecessor.
			st.finished[i] = true
			continue
		}
		st.wg.Go(func() {
			err := st.c.decider.decide(trace.ContextWithSpanContext(st.ctx, it.span), it.ev)
			st.mu.Lock()
			it.in.decideErr = err
			st.finished[i] = true
			st.mu.Unlock()
			select {
			case st.notify <- struct{}{}:
			default:
			}
		})
	}
}

// next blocks until some messages may run again and returns them, or nil
// once none is left (or the context ended).
func (st *stager) next() []undecided {
	for {
		st.mu.Lock()
		if len(st.pending) == 0 {
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
		// One is in: gather the others that come in meanwhile.
		timer := time.NewTimer(decideGrace)
	gather:
		for {
			st.mu.Lock()
			all := len(st.finished) == len(st.items)
			st.mu.Unlock()
			if all {
				break
			}
			select {
			case <-st.notify:
			case <-timer.C:
				break gather
			}
		}
		timer.Stop()
		st.mu.Lock()
		var stage []undecided
		var rest []int
		blocked := map[string]bool{}
		for _, i := range st.pending {
			it := st.items[i]
			if !st.finished[i] || blocked[it.key] {
				blocked[it.key] = true
				rest = append(rest, i)
				continue
			}
			stage = append(stage, *it)
		}
		st.pending = rest
		st.mu.Unlock()
		if len(stage) > 0 {
			return stage
		}
	}
}

// readyLocked reports whether some pending message is decided and not
// behind an undecided one of its key.
func (st *stager) readyLocked() bool {
	blocked := map[string]bool{}
	for _, i := range st.pending {
		it := st.items[i]
		if st.finished[i] && !blocked[it.key] {
			return true
		}
		blocked[it.key] = true
	}
	return false
}

// waiting reports whether a key still has messages not handed out.
func (st *stager) waiting(key string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, i := range st.pending {
		if st.items[i].key == key {
			return true
		}
	}
	return false
}

// wait waits for every decision goroutine.
func (st *stager) wait() { st.wg.Wait() }
