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
