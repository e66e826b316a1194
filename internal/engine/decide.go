package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// decideAll runs Config.Decide for the inputs that will need it,
// concurrently and before the batch transaction opens, and records each
// decision. Identities already recorded and versions already passed are
// skipped: they will not apply. A failure is carried into the pipeline.
func (c *Consumer) decideAll(ctx context.Context, ins []input) {
	if c.cfg.Decide == nil {
		return
	}
	var wg sync.WaitGroup
	for i := range ins {
		wg.Go(func() { ins[i].decideErr = c.decideOne(ctx, ins[i].raw) })
	}
	wg.Wait()
}

// decideGrace is how long a batch gathers finished decisions before it
// commits them, leaving the slow ones (a model call of a minute) for later
// transactions.
const decideGrace = 50 * time.Millisecond

// stager hands out a batch in stages as its decisions come in.
type stager struct {
	keys      []string
	completed chan int
	finished  map[int]bool
	pending   []int // batch indexes not yet handed out, in batch order
	wg        sync.WaitGroup
}

// decideStaged starts every decision of the batch at once. The stager's
// next returns, stage by stage, the deliveries whose decisions are in
// (gathered for up to decideGrace at a time), so fast deliveries commit
// while slow ones still decide. A key's deliveries never overtake each
// other: a delivery waits for every earlier one of its key. wait must be
// called before the inputs are dropped.
func (c *Consumer) decideStaged(ctx context.Context, keys []string, ins []input) *stager {
	st := &stager{keys: keys, completed: make(chan int, len(ins)), finished: map[int]bool{}}
	for i := range ins {
		st.pending = append(st.pending, i)
		st.wg.Go(func() {
			ins[i].decideErr = c.decideOne(ctx, ins[i].raw)
			st.completed <- i
		})
	}
	return st
}

// next blocks until some deliveries may commit and returns their indexes,
// or nil when every one has been handed out.
func (st *stager) next() []int {
	for len(st.pending) > 0 {
		// Wait for one decision, then gather for a moment more.
		st.finished[<-st.completed] = true
		timer := time.NewTimer(decideGrace)
	gather:
		for len(st.finished) < len(st.keys) {
			select {
			case i := <-st.completed:
				st.finished[i] = true
			case <-timer.C:
				break gather
			}
		}
		timer.Stop()
		var ready, rest []int
		blocked := map[string]bool{}
		for _, i := range st.pending {
			if !st.finished[i] || blocked[st.keys[i]] {
				blocked[st.keys[i]] = true
				rest = append(rest, i)
				continue
			}
			ready = append(ready, i)
		}
		st.pending = rest
		if len(ready) > 0 {
			return ready
		}
	}
	return nil
}

// waiting reports whether a key still has deliveries not handed out.
func (st *stager) waiting(key string) bool {
	for _, i := range st.pending {
		if st.keys[i] == key {
			return true
		}
	}
	return false
}

// wait waits for every decision goroutine.
func (st *stager) wait() { st.wg.Wait() }

// decideOne decides one message unless it will not apply, and records the
// decision; the error, if any, fails the delivery in the pipeline.
func (c *Consumer) decideOne(ctx context.Context, raw []byte) error {
	ev, err := seqboxtype.ParseEventExcluding(raw, c.cfg.VolatileAttributes)
	if err != nil {
		return nil // rejected in the pipeline
	}
	op := c.cfg.Store.Executor()
	if _, err := op.InboxSeen(ctx, store.MessageRef{Consumer: c.cfg.Name, Source: ev.Source, ID: ev.ID}); !errors.Is(err, store.ErrNotFound) {
		return err // seen (nil), or the store failed
	}
	if v, ok := ev.Version(); ok {
		cur, err := op.KeyVersion(ctx, store.KeyRef{Consumer: c.cfg.Name, Key: ev.PartitionKey})
		if err != nil || (cur != nil && v <= *cur) {
			return err
		}
	}
	if _, err := op.DecisionGet(ctx, store.MessageRef{Consumer: c.cfg.Name, Source: ev.Source, ID: ev.ID}); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	now := c.cfg.Now()
	claim, err := op.DecisionClaim(ctx, store.DecisionClaimParams{Consumer: c.cfg.Name, Source: ev.Source, ID: ev.ID, Owner: c.claimant, Now: now, Until: now.Add(c.cfg.DecideTimeout + time.Second)})
	if err != nil {
		return err
	}
	if !claim.Claimed {
		// Back when the claim runs out, or sooner to see whether the
		// decision landed: at most eight waits per claim, well below the
		// crash-loop guard's count of deliveries.
		return &decisionInFlight{wait: min(claim.Until.Sub(now), c.cfg.DecideTimeout/8)}
	}
	defer func() {
		_ = op.DecisionUnclaim(context.WithoutCancel(ctx), store.DecisionUnclaimParams{Consumer: c.cfg.Name, Source: ev.Source, ID: ev.ID, Owner: c.claimant})
	}()
	// Recorded while the claim was being taken: nothing to ask.
	if _, err := op.DecisionGet(ctx, store.MessageRef{Consumer: c.cfg.Name, Source: ev.Source, ID: ev.ID}); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	dctx, cancel := context.WithTimeout(withIdentity(ctx, c.cfg.Name, ev, false), c.cfg.DecideTimeout)
	defer cancel()
	d, err := c.cfg.Decide(dctx, ev)
	if err != nil {
		return fmt.Errorf("decide: %w", err)
	}
	_, err = op.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: c.cfg.Name, Source: ev.Source, ID: ev.ID, Decision: d, At: c.cfg.Now()})
	return err
}

// decisionInFlight: another consumer is deciding this identity right
// now. The delivery comes back a while later, without counting as a
// failure: by then the decision is recorded (and usually applied, so the
// copy is a duplicate), or its claim ran out (its decider died) and this
// delivery decides.
type decisionInFlight struct{ wait time.Duration }

func (e *decisionInFlight) Error() string {
	return fmt.Sprintf("its decision is in flight elsewhere; waiting %s for it instead of asking again", e.wait.Round(time.Millisecond))
}

// retryAfter is how long to wait for a decision in flight, at least
// minDecisionWait.
func (e *decisionInFlight) retryAfter() time.Duration { return max(e.wait, minDecisionWait) }

// minDecisionWait is the shortest wait for a decision in flight.
const minDecisionWait = 100 * time.Millisecond

// withDecision puts the recorded decision into the handler's context. A
// message released from the parked table may have none yet (its Decide
// failed before it was parked); it is decided here, inside the
// transaction, which is the rare slow path.
func (p *pipeline) withDecision(ctx context.Context, tx *batchTx, ev Event, now time.Time) (context.Context, error) {
	if p.cfg.Decide == nil {
		return ctx, nil
	}
	d, err := tx.DecisionGet(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID})
	if errors.Is(err, store.ErrNotFound) {
		if d, err = p.cfg.Decide(withIdentity(ctx, p.cfg.Name, ev, true), ev); err != nil {
			return ctx, fmt.Errorf("decide: %w", err)
		}
		d, err = tx.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID, Decision: d, At: now})
	}
	if err != nil {
		return ctx, err
	}
	return withDecisionValue(ctx, d), nil
}
