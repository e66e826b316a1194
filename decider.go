package seqbox

import (
	"context"

	"github.com/seqbox/seqbox/seqboxtype"
)

// Decider is the half of an agent's step that runs outside the transaction:
// slow, expensive, non-deterministic. Its result is recorded once per
// identity.
type Decider func(ctx context.Context, ev seqboxtype.Event) ([]byte, error)

// DecisionFrom returns the decision Config.Decide recorded for the event the
// handler is applying.
func DecisionFrom(ctx context.Context) ([]byte, bool) {
	d, ok := ctx.Value(decisionKey{}).([]byte)
	return d, ok
}
