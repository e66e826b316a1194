package seqbox

import (
	"context"
	"strings"
	"sync"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/transport"
)

// decidePipe is Run's agent path after the turn (docs/design.md, "The
// agent path"): a worker whose batch stopped messages to be decided hands
// them here and goes on with other keys, instead of holding its batch
// until the slowest decision is in. The pipe asks each Decide at once (up
// to DecideConcurrency in flight, the decider's slots), and its applier
// runs the decided ones again, all that came in while the last stage
// committed, in one transaction: group commit across batches. A key's
// messages stay in order (the stager), and a key stays pinned to its batch
// until nothing of it is left here. A key's next message, when received
// already, runs in the same transaction as the one before it (adopt): the
// commit that ends a turn starts the next. On a transport whose groups
// hand a key's messages out one at a time (transport.NextTaker), the next
// one is taken for it first.
type decidePipe struct {
	c  *Consumer
	st *stager
	// crashed stops Run at once when the applier meets an injected crash
	// (the workers would otherwise go on until Run ends).
	crashed func(error)
	// mu guards the groups' counts, shared by the applier and the
	// workers that hand it their stopped messages.
	mu sync.Mutex
}

// pipeGroup is what one received batch left in the pipe: how many of its
// messages are not through yet, and its scheduler's side.
type pipeGroup struct {
	left int
	// unpin frees keys of the batch that have nothing left in the pipe;
	// done ends the batch once nothing of it is left; adopt takes the
	// next delivery received for one of its keys into the batch, and
	// took one taken for it outside a receive (with join, into the
	// batch when it holds the key: it reports whether it did; else to
	// the scheduler, as received).
	unpin func(keys []string)
	done  func()
	adopt func(key string) (transport.Delivery, *parsedEnvelope, bool)
	took  func(key string, d transport.Delivery, pe *parsedEnvelope, join bool) bool
}

func newDecidePipe(ctx context.Context, c *Consumer, crashed func(error)) *decidePipe {
	st := newStager(ctx, c)
	st.live = true
	return &decidePipe{c: c, st: st, crashed: crashed}
}

// add hands the pipe the messages a batch stopped to be decided, with
// the batch's side (g, whose count it sets).
func (p *decidePipe) add(us []undecided, g pipeGroup) {
	grp := &g
	grp.left = len(us)
	for i := range us {
		us[i].grp = grp
	}
	p.st.add(us)
}

// run applies stages until ctx ends, one after the other, on one applier
// on every store; when the applier meets a crash it tells crashed at
// once, which ends ctx. Whatever is still in the pipe then is left to its
// leases, as a worker stopped mid-batch leaves its batch.
//
// One applier, not one per worker: where writers take turns (SQLite) a
// second would only wait for the first, and on PostgreSQL appliers side
// by side split what was decided into stages of a few messages each,
// whose set-based statements then cost nearly as much as for many. With
// one, a stage holds all that was decided while the last one committed.
// On the 2-core machine, PostgreSQL, an instant agent: 2,122–2,439 →
// 2,642–2,979 events/s with `seqbox bench agent --target library`,
// 1,485–1,628 → 1,862–2,193 with serve; a 300 ms agent moved within its
// spread (docs/benchmarks-history.md §27). A server with many cores may
// apply faster with several; that is unmeasured.
func (p *decidePipe) run(ctx context.Context) {
	defer p.st.wait()
	if err := p.apply(ctx); err != nil && fault.IsCrash(err) {
		p.crashed(err)
	}
}

// apply runs stages one after the other.
func (p *decidePipe) apply(ctx context.Context) error {
	for stage := p.st.next(); stage != nil; stage = p.st.next() {
		ds := make([]transport.Delivery, len(stage))
		ins := make([]input, len(stage))
		keys := make([]string, len(stage))
		grps := make([]*pipeGroup, len(stage))
		after := make([]bool, len(stage))
		for j, u := range stage {
			ds[j], ins[j], keys[j], grps[j], after[j] = u.delivery, u.rerun(), u.key, u.grp, u.after
		}
		ds, ins, keys, grps = p.adoptSuccessors(ctx, ds, ins, keys, grps, after)
		_, more, err := p.c.commitAndSettle(ctx, ds, ins, keys)
		if err != nil && (fault.IsCrash(err) || ctx.Err() != nil) {
			return err
		}
		// Any other failure was logged and its deliveries nacked by
		// commitAndSettle: they come back through the queue.
		p.mu.Lock()
		for i := range more {
			g := grps[more[i].origin]
			more[i].grp = g
			g.left++
		}
		p.mu.Unlock()
		p.st.add(more)
		p.through(keys, grps)
	}
	return nil
}

// adoptSuccessors appends, after the last message of each key in the
// stage, that key's next delivery if its batch's scheduler holds one
// received already, or else, on a transport that hands a group's
// messages out one at a time, takes that next one now (takeNext); it
// joins the batch's group. Not behind a message with no decision yet
// (after[j]: it went with its predecessor and only takes its turn in
// this stage): the next one could only go with it again, a pass through
// the pipeline for nothing; it is adopted by the stage that applies that
// message (TestNextMessageIsNotTakenBehindAnUndecidedOne).
func (p *decidePipe) adoptSuccessors(ctx context.Context, ds []transport.Delivery, ins []input, keys []string, grps []*pipeGroup, after []bool) ([]transport.Delivery, []input, []string, []*pipeGroup) {
	last := map[string]int{}
	for j, key := range keys {
		last[key] = j
	}
	var heads []int // the stage's last message of each key with no next received
	n := len(keys)
	for j := range n {
		key, g := keys[j], grps[j]
		if last[key] != j || after[j] || g.adopt == nil || !strings.HasPrefix(key, "k:") {
			continue
		}
		d, pe, ok := g.adopt(key)
		if !ok {
			// Only for a head whose decision came in: one whose decision
			// failed is nacked by the stage, and its next message, taken,
			// would be parked behind it (held, with a hold deadline)
			// instead of waiting in the queue behind its group's head.
			if ds[j] != nil && g.took != nil && ins[j].decideErr == nil {
				heads = append(heads, j)
			}
			continue
		}
		ds, ins, keys, grps = p.join(ds, ins, keys, grps, g, key, d, pe)
	}
	return p.takeNext(ctx, heads, ds, ins, keys, grps)
}

// join appends d, the next delivery of key, to the stage as a member of
// g.
func (p *decidePipe) join(ds []transport.Delivery, ins []input, keys []string, grps []*pipeGroup, g *pipeGroup, key string, d transport.Delivery, pe *parsedEnvelope) ([]transport.Delivery, []input, []string, []*pipeGroup) {
	p.mu.Lock()
	g.left++
	p.mu.Unlock()
	return append(ds, d), append(ins, deliveryInput(d, pe)), append(keys, key), append(grps, g)
}

// takeNext takes, on a transport whose groups hand a key's messages out
// one at a time (transport.NextTaker: the embedded queue the gateway
// publishes to), the next message of each key whose head the stage runs
// with its decision (heads: their indexes) and whose next one the
// scheduler does not hold:
// without it, that one is ready only once the stage's commit acknowledges
// the head, and then takes a receive and a transaction of its own for its
// turn. All of them in one statement, before the stage's transaction. A
// failure to take them is only logged: they come through the queue.
func (p *decidePipe) takeNext(ctx context.Context, heads []int, ds []transport.Delivery, ins []input, keys []string, grps []*pipeGroup) ([]transport.Delivery, []input, []string, []*pipeGroup) {
	nt, ok := p.c.cfg.Transport.(transport.NextTaker)
	if !ok || len(heads) == 0 {
		return ds, ins, keys, grps
	}
	held := make([]transport.Delivery, len(heads))
	at := make(map[string]int, len(heads))
	for i, j := range heads {
		held[i] = ds[j]
		at[keys[j]] = j
	}
	taken, err := nt.TakeNext(ctx, held)
	if err != nil {
		if ctx.Err() == nil {
			p.c.cfg.Logger.Warn("seqbox: could not take the next messages of the keys being applied; they come through the queue",
				"consumer", p.c.cfg.Name, "err", err)
		}
		return ds, ins, keys, grps
	}
	for _, d := range taken {
		ev, perr := p.c.p.parse(d.Body())
		pe := &parsedEnvelope{ev: ev, err: perr}
		key := deliveryKey(d, pe)
		j, ok := at[key]
		if !ok {
			// Not the next of a key of the stage (its group is another
			// key's): the scheduler takes it as received.
			grps[heads[0]].took(key, d, pe, false)
			continue
		}
		if g := grps[j]; g.took(key, d, pe, true) {
			delete(at, key)
			ds, ins, keys, grps = p.join(ds, ins, keys, grps, g, key, d, pe)
		}
	}
	return ds, ins, keys, grps
}

// through counts a stage's messages (keys[i] of group grps[i]) out of
// their batches, unpinning keys with nothing left and ending batches with
// nothing left.
func (p *decidePipe) through(keys []string, grps []*pipeGroup) {
	type free struct {
		g    *pipeGroup
		keys []string
	}
	var frees []free
	at := map[*pipeGroup]int{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, key := range keys {
		g := grps[i]
		g.left--
		if p.st.waiting(key) {
			continue
		}
		j, ok := at[g]
		if !ok {
			j = len(frees)
			at[g] = j
			frees = append(frees, free{g: g})
		}
		frees[j].keys = append(frees[j].keys, key)
	}
	for _, f := range frees {
		f.g.unpin(f.keys)
	}
	for g := range at {
		if g.left == 0 {
			g.done()
		}
	}
}
