package seqbox

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
)

// run is Run; with idle > 0 it also stops once idle for that long.
func (c *Consumer) run(ctx context.Context, idle time.Duration) error {
	if c.cfg.Transport == nil {
		return invalidConfig("Transport", "required by Run")
	}
	// Run and RunUntilIdle registered it (checkRegistration); a failure
	// there is not fatal, and the control loop registers it as soon as it
	// can.
	s := newScheduler(c.cfg.Workers * c.cfg.BatchSize * 2)
	// On a store with one writer, one batch runs at a time and takes all
	// that is ready; a consumer with Decide keeps sharing, so that slow
	// decisions of different keys are asked side by side.
	s.oneBatch = oneWriter(c.cfg.Store) && c.cfg.Decide == nil
	// Elsewhere batches run side by side, and group commit holds a second
	// one for a quarter of the target latency (scheduler.groupWait); with
	// Decide, slow decisions of different keys are still asked side by
	// side at once.
	if !s.oneBatch && c.cfg.Decide == nil && c.cfg.TargetLatency > 0 {
		s.groupWait = c.cfg.TargetLatency / 4
	}
	defer s.stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	// With Decide, the messages a batch stops to be decided go to the
	// pipe, and its worker goes on with other keys.
	var pipe *decidePipe
	if c.cfg.Decide != nil {
		pipe = newDecidePipe(ctx, c, func(err error) { cancel(err) })
		wg.Go(func() { pipe.run(ctx) })
	}
	for range c.cfg.Workers {
		wg.Go(func() {
			for {
				b := s.take(ctx, c.cfg.BatchSize, c.sizer)
				if b == nil {
					return
				}
				handed, err := c.runDeliveries(ctx, b, s, pipe)
				if err != nil && fault.IsCrash(err) {
					cancel(err)
				}
				if !handed {
					s.done(b)
				}
			}
		})
	}
	wg.Go(func() { c.maintainLoop(ctx) })
	wg.Go(func() { c.controlLoop(ctx) })
	wg.Go(func() { c.extendLoop(ctx, s) })
	var recvErr error
	lastBusy := time.Now()
	for ctx.Err() == nil {
		if !s.waitRoom(ctx) {
			break
		}
		if err := c.awaitStore(ctx); err != nil {
			recvErr = err
			break
		}
		received := time.Now()
		ds, err := c.cfg.Transport.Receive(ctx, c.cfg.BatchSize)
		if idle > 0 && err == nil {
			switch {
			case len(ds) > 0 || !s.idle():
				lastBusy = time.Now()
			case time.Since(lastBusy) >= idle:
				cancel(nil) // idle: a clean shutdown
				continue
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, transport.ErrClosed) {
				recvErr = err
				break
			}
			c.cfg.Logger.Error("seqbox: receive failed; backing off", "consumer", c.cfg.Name, "err", err)
			sleep(ctx, time.Second)
			continue
		}
		if len(ds) > 0 {
			keys := make([]string, len(ds))
			parsed := make([]*parsedEnvelope, len(ds))
			for i, d := range ds {
				ev, err := c.p.parse(d.Body())
				parsed[i] = &parsedEnvelope{ev: ev, err: err}
				keys[i] = deliveryKey(d, parsed[i])
			}
			s.addMany(keys, ds, parsed)
			c.tr.receive(ctx, received, ds)
		}
	}
	cancel(nil)
	wg.Wait()
	if cause := context.Cause(ctx); fault.IsCrash(cause) {
		return cause // a crash settles nothing: the leases expire
	}
	for _, d := range s.abandon() {
		_ = d.Nack(context.WithoutCancel(ctx), 0)
	}
	return recvErr
}

// runDeliveries applies one batch and settles it at the broker; keys
// whose part of the batch is settled early are unpinned in s at once.
// The messages it stopped to be decided are decided and run again: in
// pipe when there is one (handed: the pipe ends the batch in s), else
// here.
func (c *Consumer) runDeliveries(ctx context.Context, b *batch, s *scheduler, pipe *decidePipe) (handed bool, err error) {
	unpin := func(keys []string) { s.unpinEarly(b, keys) }
	ds := b.deliveries
	ins := make([]input, len(ds))
	for i, d := range ds {
		var pe *parsedEnvelope
		if i < len(b.parsed) {
			pe = b.parsed[i]
		}
		ins[i] = deliveryInput(d, pe)
	}
	_, us, err := c.commitAndSettle(ctx, ds, ins, b.dkeys)
	if err != nil || len(us) == 0 {
		return false, err
	}
	// Some deliveries stopped to be decided; the keys settled already
	// are free for other workers meanwhile.
	deciding := map[string]bool{}
	for _, u := range us {
		deciding[u.key] = true
	}
	var settled []string
	for _, key := range b.keys {
		if !deciding[key] {
			settled = append(settled, key)
		}
	}
	unpin(settled)
	if pipe != nil {
		pipe.add(us, pipeGroup{unpin: unpin, done: func() { s.done(b) },
			adopt: func(key string) (transport.Delivery, *parsedEnvelope, bool) { return s.adopt(b, key) },
			took: func(key string, d transport.Delivery, pe *parsedEnvelope, join bool) bool {
				return s.adoptTaken(b, key, d, pe, join)
			}})
		return true, nil
	}
	_, err = c.decideAndApply(ctx, us, unpin)
	return false, err
}

// deliveryInput is the pipeline's input for a received delivery, with
// its envelope when the receiver parsed it (pe, else nil).
func deliveryInput(d transport.Delivery, pe *parsedEnvelope) input {
	in := input{kind: received{}, raw: d.Body(), attempt: d.Attempt()}
	in.traceParent, in.traceState = brokerTrace(d)
	if pt, ok := d.(transport.PublishTimer); ok {
		in.published = pt.PublishedAt()
	}
	if pe != nil {
		in.ev, in.perr, in.parsed = pe.ev, pe.err, true
	}
	return in
}

// deliveryKey is the scheduling key: the partition key, or a unique key for
// messages that carry none (they need no ordering). A valid envelope's key
// comes from its parse (pe); a body the parser refuses is still scheduled
// under the partitionkey member it may hold, as before there was a parse,
// so that its key's other messages wait for its outcome.
func deliveryKey(d transport.Delivery, pe *parsedEnvelope) string {
	if pe != nil && pe.err == nil {
		if pe.ev.PartitionKey != "" {
			return "k:" + pe.ev.PartitionKey
		}
		return "u:" + strconv.FormatUint(nextUnkeyed(), 10)
	}
	var k struct {
		PartitionKey string `json:"partitionkey"`
	}
	if json.Unmarshal(d.Body(), &k) == nil && k.PartitionKey != "" {
		return "k:" + k.PartitionKey
	}
	return "u:" + strconv.FormatUint(nextUnkeyed(), 10)
}

func nextUnkeyed() uint64 {
	unkeyed.Lock()
	defer unkeyed.Unlock()
	unkeyed.n++
	return unkeyed.n
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// extendLoop keeps the leases of every delivery the consumer holds alive,
// the ones waiting in the scheduler as well as the ones in a running batch
// (a model call may take a minute), until ctx ends.
func (c *Consumer) extendLoop(ctx context.Context, s *scheduler) {
	t := time.NewTicker(c.cfg.ExtendEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.hooks.At(fault.DuringLeaseExtend); err != nil {
			return // an injected crash of the extender: leases run out
		}
		c.extend(ctx, s.held())
	}
}

// extend pushes the leases of ds by ExtendBy: in one round trip when the
// transport can, else one by one. A lost lease is only skipped: its
// delivery's settlement meets it, and the inbox absorbs the redelivery.
func (c *Consumer) extend(ctx context.Context, ds []transport.Delivery) {
	warn := func(err error) {
		if err != nil && ctx.Err() == nil && !errors.Is(err, transport.ErrLeaseLost) {
			c.cfg.Logger.Warn("seqbox: lease extension failed; the message may be redelivered meanwhile",
				"consumer", c.cfg.Name, "err", err)
		}
	}
	if be, ok := c.cfg.Transport.(transport.BatchExtender); ok {
		warn(be.ExtendBatch(ctx, ds, c.cfg.ExtendBy))
		return
	}
	for _, d := range ds {
		warn(d.Extend(ctx, c.cfg.ExtendBy))
	}
}

// unkeyed numbers the deliveries that carry no key, each its own.
var unkeyed struct {
	sync.Mutex
	n uint64
}

// oneWriter reports whether st runs one write transaction at a time
// (SQLite's stores say so with OneWriter).
func oneWriter(st store.Store) bool {
	ow, ok := st.(interface{ OneWriter() bool })
	return ok && ow.OneWriter()
}
