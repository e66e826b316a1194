package seqbox

import (
	"context"
	"sync"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/transport"
)

// decidePipe is Run's agent path after the turn (docs/design.md, "The
// agent path"): a worker whose batch stopped messages to be decided hands
// them here and goes on with other keys, instead of holding its batch
// until the slowest decision is in. The pipe asks each Decide at once (up
// to DecideConcurrency in flight, the decider's slots) and one applier
// runs the decided ones again, all that came in while it committed the
// last stage, in one transaction: group commit across batches. A key's
// messages stay in order (the stager), and a key stays pinned to its batch
// until nothing of it is left here.
type decidePipe struct {
	c  *Consumer
	st *stager
	// mu guards the groups' counts, shared by the appliers.
	mu sync.Mutex
}

// pipeGroup is what one received batch left in the pipe: how many of its
// messages are not through yet, and what to tell its scheduler.
type pipeGroup struct {
	left int
	// unpin frees keys of the batch that have nothing left in the pipe;
	// done ends the batch once nothing of it is left.
	unpin func(keys []string)
	done  func()
}

func newDecidePipe(ctx context.Context, c *Consumer) *decidePipe {
	st := newStager(ctx, c)
	st.live = true
	return &decidePipe{c: c, st: st}
}

// add hands the pipe the messages a batch stopped to be decided; unpin
// and done are the batch's, called as its keys and then the whole batch
// are through.
func (p *decidePipe) add(us []undecided, unpin func(keys []string), done func()) {
	g := &pipeGroup{left: len(us), unpin: unpin, done: done}
	for i := range us {
		us[i].grp = g
	}
	p.st.add(us)
}

// run applies stages on appliers goroutines until ctx ends or a crash;
// it returns the first crash. Whatever is still in the pipe then is left
// to its leases, as a worker stopped mid-batch leaves its batch. Stages
// applied side by side never share a key: a key's next message enters the
// pipe only once the stage before it is through.
func (p *decidePipe) run(ctx context.Context, appliers int) error {
	defer p.st.wait()
	errs := make(chan error, appliers)
	for range appliers {
		go func() { errs <- p.apply(ctx) }()
	}
	var first error
	for range appliers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// apply runs stages one after the other.
func (p *decidePipe) apply(ctx context.Context) error {
	for stage := p.st.next(); stage != nil; stage = p.st.next() {
		ds := make([]transport.Delivery, len(stage))
		ins := make([]input, len(stage))
		keys := make([]string, len(stage))
		for j, u := range stage {
			ds[j], ins[j], keys[j] = u.delivery, u.rerun(), u.key
		}
		_, more, err := p.c.commitAndSettle(ctx, ds, ins, keys)
		if err != nil && (fault.IsCrash(err) || ctx.Err() != nil) {
			return err
		}
		// Any other failure was logged and its deliveries nacked by
		// commitAndSettle: they come back through the queue.
		p.mu.Lock()
		for i := range more {
			g := stage[more[i].origin].grp
			more[i].grp = g
			g.left++
		}
		p.mu.Unlock()
		p.st.add(more)
		p.through(stage)
	}
	return nil
}

// through counts a stage's messages out of their batches, unpinning keys
// with nothing left and ending batches with nothing left.
func (p *decidePipe) through(stage []undecided) {
	type free struct {
		g    *pipeGroup
		keys []string
	}
	var frees []free
	at := map[*pipeGroup]int{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range stage {
		g := u.grp
		g.left--
		if p.st.waiting(u.key) {
			continue
		}
		i, ok := at[g]
		if !ok {
			i = len(frees)
			at[g] = i
			frees = append(frees, free{g: g})
		}
		frees[i].keys = append(frees[i].keys, u.key)
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
