package seqbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seqbox/seqbox/store"
)

// Decider is the half of an agent's step that runs outside the transaction:
// slow, expensive, non-deterministic. Its result is recorded once per
// identity.
type Decider func(ctx context.Context, ev Event) ([]byte, error)

type decisionKey struct{}

// DecisionFrom returns the decision Config.Decide recorded for the event the
// handler is applying.
func DecisionFrom(ctx context.Context) ([]byte, bool) {
	d, ok := ctx.Value(decisionKey{}).([]byte)
	return d, ok
}

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

// decideGrace is how long a batch waits for all its decisions before it
// commits the ones that are ready and leaves the slow ones (a model call of
// a minute) for a second transaction.
const decideGrace = 50 * time.Millisecond

// stage is the part of a batch (indexes into it) that commits together,
// once wait returns.
type stage struct {
	idx  []int
	wait func()
}

// decideStaged starts every decision at once and splits the batch: what is
// decided within decideGrace commits first; the rest commits when its
// decisions are in. A key's deliveries never overtake each other: one waits
// for the stage of the slowest earlier delivery of its key. The returned
// function waits for every decision (call it before returning).
func (c *Consumer) decideStaged(ctx context.Context, keys []string, ins []input) ([]stage, func()) {
	// ins[i].decideErr is written by the deciding goroutine; read it only
	// after the stage's wait.
	done := make([]chan struct{}, len(ins))
	var wg sync.WaitGroup
	for i := range ins {
		done[i] = make(chan struct{})
		wg.Go(func() {
			defer close(done[i])
			ins[i].decideErr = c.decideOne(ctx, ins[i].raw)
		})
	}
	timer := time.NewTimer(decideGrace)
	defer timer.Stop()
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
	case <-timer.C:
	}
	var first, second stage
	late := map[string]bool{}
	for i, key := range keys {
		select {
		case <-done[i]:
		default:
			late[key] = true
		}
		if late[key] {
			second.idx = append(second.idx, i)
		} else {
			first.idx = append(first.idx, i)
		}
	}
	first.wait = func() {}
	second.wait = func() { <-all }
	return []stage{first, second}, func() { <-all }
}

func (c *Consumer) decideOne(ctx context.Context, raw []byte) error {
	ev, err := parseEvent(raw, c.cfg.VolatileAttributes)
	if err != nil {
		return nil // rejected in the pipeline
	}
	op := c.cfg.Store.Operator()
	if _, _, seen, err := op.Seen(ctx, c.cfg.Name, ev.Source, ev.ID); err != nil || seen {
		return err
	}
	if v, ok := ev.Version(); ok {
		cur, err := op.KeyVersion(ctx, c.cfg.Name, ev.PartitionKey)
		if err != nil || (cur != nil && v <= *cur) {
			return err
		}
	}
	if _, err := op.Decision(ctx, c.cfg.Name, ev.Source, ev.ID); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	d, err := c.cfg.Decide(ctx, ev)
	if err != nil {
		return fmt.Errorf("decide: %w", err)
	}
	_, err = op.RecordDecision(ctx, c.cfg.Name, ev.Source, ev.ID, d, c.cfg.Now())
	return err
}

// withDecision puts the recorded decision into the handler's context. A
// message released from the parked table may have none yet (its Decide
// failed before it was parked); it is decided here, inside the
// transaction, which is the rare slow path.
func (p *pipeline) withDecision(ctx context.Context, tx *batchTx, ev Event, now time.Time) (context.Context, error) {
	if p.cfg.Decide == nil {
		return ctx, nil
	}
	d, err := tx.Decision(ctx, p.cfg.Name, ev.Source, ev.ID)
	if errors.Is(err, store.ErrNotFound) {
		if d, err = p.cfg.Decide(ctx, ev); err != nil {
			return ctx, fmt.Errorf("decide: %w", err)
		}
		err = tx.RecordDecision(ctx, p.cfg.Name, ev.Source, ev.ID, d, now)
	}
	if err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, decisionKey{}, d), nil
}
