package seqbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
)

// keyConflictDelay is how soon a delivery that lost a key race comes back.
const keyConflictDelay = 50 * time.Millisecond

// Run receives from the transport and applies until ctx is cancelled. Keys
// run in parallel on Config.Workers workers; a key is pinned to one worker
// while it has deliveries in flight, so its deliveries apply strictly in
// sequence, and a busy key goes to the back of the line after each batch so
// a hot key cannot starve the others. On cancellation, batches in flight
// either commit and ack or roll back and are left for redelivery; queued
// deliveries are nacked for prompt redelivery. Run returns nil after a
// clean shutdown.
//
// Run registers the consumer first; it returns an error matching
// ErrPolicyConflict, and receives nothing, when a live consumer of the same
// name (its heartbeat within LiveWithin) is registered with different
// policies. Competing consumers of one name must share their policies.
func (c *Consumer) Run(ctx context.Context) error {
	if err := c.checkRegistration(ctx); err != nil {
		return err
	}
	return c.run(ctx, 0)
}

// RunUntilIdle is Run that also returns, with nil, once the transport has
// had nothing to deliver for idle and nothing received is still being
// applied: a test, a backfill or a one-off replay of a queue ends when the
// transport is idle. A message nacked for a later retry is invisible at the
// transport until its backoff passes, so choose idle longer than the
// retry backoff when those retries must finish too. Messages parked by the
// gate (held, blocked) are in the database, not the queue, and do not keep
// it running.
//
// Like Run, it refuses to start beside a live consumer of the same name
// with different policies (ErrPolicyConflict).
func (c *Consumer) RunUntilIdle(ctx context.Context, idle time.Duration) error {
	if idle <= 0 {
		return invalidConfig("idle", "%s: must be positive", idle)
	}
	if err := c.checkRegistration(ctx); err != nil {
		return err
	}
	return c.run(ctx, idle)
}

// run is Run; with idle > 0 it also stops once idle for that long.
func (c *Consumer) run(ctx context.Context, idle time.Duration) error {
	if c.cfg.Transport == nil {
		return invalidConfig("Transport", "required by Run")
	}
	if err := c.register(ctx, true); err != nil && ctx.Err() == nil {
		// Not fatal: a full disk must not stop the consumer; the control
		// loop registers it as soon as it can.
		c.cfg.Logger.Warn("seqbox: registration failed; retrying", "consumer", c.cfg.Name, "err", err)
	}
	s := newScheduler(c.cfg.Workers * c.cfg.BatchSize * 2)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() {
			for {
				b := s.take(ctx, c.cfg.BatchSize)
				if b == nil {
					return
				}
				if err := c.runDeliveries(ctx, b, func(keys []string) { s.unpinEarly(b, keys) }); err != nil && fault.IsCrash(err) {
					cancel(err)
				}
				s.done(b)
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
		for _, d := range ds {
			s.add(deliveryKey(d), d)
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

// runDeliveries applies one batch and settles it at the broker.
// unpin unpins keys whose part of the batch is settled early.
func (c *Consumer) runDeliveries(ctx context.Context, b *batch, unpin func(keys []string)) error {
	ds := b.deliveries
	ins := make([]input, len(ds))
	for i, d := range ds {
		ins[i] = input{raw: d.Body(), attempt: d.Attempt()}
	}
	_, us, err := c.commitAndSettle(ctx, ds, ins, b.dkeys)
	if err != nil || len(us) == 0 {
		return err
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
	_, err = c.decideAndApply(ctx, us, unpin)
	return err
}

// commitAndSettle runs ins in one transaction, then acks or nacks each
// delivery of ds (nil for an input that came with none); keys are their
// scheduling keys. It returns the results and the messages stopped to be
// decided, which are not settled yet: they run again once decided.
func (c *Consumer) commitAndSettle(ctx context.Context, ds []transport.Delivery, ins []input, keys []string) ([][]Result, []undecided, error) {
	if len(ins) == 0 {
		return nil, nil, nil
	}
	var ackedInTx bool
	var beforeCommit func(store.ExecutorTx, [][]Result) error
	if c.txAck != nil {
		// The queue is in the store's database: acknowledge in the batch's
		// own transaction, so nothing is left between COMMIT and ACK.
		beforeCommit = func(tx store.ExecutorTx, out [][]Result) error {
			var acks []transport.Delivery
			for i, d := range ds {
				if d != nil && out[i][0].Outcome != seqboxtype.Retry && out[i][0].Outcome != outcomeDeciding {
					acks = append(acks, d)
				}
			}
			if len(acks) == 0 {
				return nil
			}
			ackedInTx = true
			return c.txAck.AckIn(ctx, tx.SQL(), acks)
		}
	}
	out, us, err := c.runBatch(ctx, ins, beforeCommit)
	if err != nil {
		if fault.IsCrash(err) || ctx.Err() != nil {
			return nil, nil, err // a crash or shutdown: leave them for redelivery
		}
		if len(ins) > 1 && !errors.Is(err, errKeyConflict) {
			// One delivery may be what the store refuses: run each in a
			// transaction of its own, so the others are not held hostage.
			c.cfg.Logger.Error("seqbox: batch failed; retrying its deliveries one by one", "consumer", c.cfg.Name,
				"deliveries", len(ins), "err", err)
			var first error
			out = make([][]Result, len(ins))
			us = nil
			for i := range ins {
				res, more, err := c.commitAndSettle(ctx, ds[i:i+1], ins[i:i+1], keys[i:i+1])
				if err != nil {
					if fault.IsCrash(err) || ctx.Err() != nil {
						return nil, nil, err
					}
					first = cmp.Or(first, err)
					continue
				}
				out[i] = res[0]
				for _, u := range more {
					u.origin = i
					us = append(us, u)
				}
			}
			return out, us, first
		}
		c.cfg.Logger.Error("seqbox: batch failed; nacking for redelivery", "consumer", c.cfg.Name, "deliveries", len(ins), "err", err)
		delay := time.Second
		if errors.Is(err, errKeyConflict) {
			delay = keyConflictDelay
		}
		for _, d := range ds {
			if d != nil {
				_ = d.Nack(context.WithoutCancel(ctx), delay)
			}
		}
		return nil, nil, err
	}
	for i := range us {
		if us[i].in.parked == nil {
			us[i].delivery, us[i].key = ds[us[i].origin], keys[us[i].origin]
		}
	}
	if err := c.hooks.At(fault.AfterCommit); err != nil {
		return nil, nil, err
	}
	settle := context.WithoutCancel(ctx)
	var acks []transport.Delivery
	for i, d := range ds {
		if d == nil {
			continue
		}
		first := out[i][0]
		var err error
		switch {
		case first.Outcome == outcomeDeciding:
			continue // it runs again once decided
		case first.Outcome != seqboxtype.Retry:
			acks = append(acks, d)
			continue
		case first.KeyConflict:
			err = d.Nack(settle, keyConflictDelay)
		case first.RetryAfter > 0:
			err = d.Nack(settle, first.RetryAfter)
		default:
			err = d.Nack(settle, c.cfg.Retry.Backoff(first.Attempt))
		}
		if err != nil {
			c.cfg.Logger.Warn("seqbox: settle failed after commit; the inbox absorbs the redelivery",
				"consumer", c.cfg.Name, "source", first.Source, "id", first.ID, "err", err)
		}
	}
	if !ackedInTx {
		c.ack(settle, acks)
	}
	return out, us, nil
}

// ack settles committed deliveries, in one round trip when the transport
// can. A lost lease is only logged: the inbox absorbs the redelivery.
func (c *Consumer) ack(ctx context.Context, ds []transport.Delivery) {
	if len(ds) == 0 {
		return
	}
	if b, ok := c.cfg.Transport.(transport.BatchAcker); ok {
		if err := b.AckBatch(ctx, ds); err != nil {
			c.cfg.Logger.Warn("seqbox: ack failed after commit; the inbox absorbs the redelivery",
				"consumer", c.cfg.Name, "err", err)
		}
		return
	}
	for _, d := range ds {
		if err := d.Ack(ctx); err != nil {
			c.cfg.Logger.Warn("seqbox: ack failed after commit; the inbox absorbs the redelivery",
				"consumer", c.cfg.Name, "err", err)
		}
	}
}

// deliveryKey is the scheduling key: the partition key, or a unique key for
// messages that carry none (they need no ordering).
func deliveryKey(d transport.Delivery) string {
	var k struct {
		PartitionKey string `json:"partitionkey"`
	}
	if json.Unmarshal(d.Body(), &k) == nil && k.PartitionKey != "" {
		return "k:" + k.PartitionKey
	}
	return "u:" + strconv.FormatUint(nextUnkeyed(), 10)
}

var unkeyed struct {
	sync.Mutex
	n uint64
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
		for _, d := range s.held() {
			err := d.Extend(ctx, c.cfg.ExtendBy)
			if err != nil && ctx.Err() == nil && !errors.Is(err, transport.ErrLeaseLost) {
				c.cfg.Logger.Warn("seqbox: lease extension failed; the message may be redelivered meanwhile",
					"consumer", c.cfg.Name, "err", err)
			}
		}
	}
}

// refreshMetrics sets the gauges (held messages, blocked keys, age of the
// oldest stuck message, DLQ size, inbox rows, gaps) from the store. Run
// calls it every 15 seconds.
func (c *Consumer) refreshMetrics(ctx context.Context) error {
	counts, err := c.cfg.Store.Executor().Counts(ctx, c.cfg.Name)
	if err != nil {
		return err
	}
	refresh(c.cfg.Metrics, c.cfg.Name, counts, c.cfg.Now())
	return nil
}
