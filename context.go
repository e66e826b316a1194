package seqbox

import (
	"context"

	"github.com/seqbox/seqbox/internal/handoff"
	"github.com/seqbox/seqbox/seqboxtype"
)

// withIdentity puts the message's identity into ctx (seqbox.IdentityFrom).
func withIdentity(ctx context.Context, consumer string, ev seqboxtype.Event, inTx bool) context.Context {
	return context.WithValue(ctx, handoff.IdentityKey{}, seqboxtype.Identity{Consumer: consumer, Source: ev.Source, ID: ev.ID, InTransaction: inTx})
}

// withDecision puts a recorded decision into ctx (seqbox.DecisionFrom).
func withDecisionValue(ctx context.Context, d []byte) context.Context {
	return context.WithValue(ctx, handoff.DecisionKey{}, d)
}

// IdentityFrom returns the identity of the message the context belongs
// to, when it is a Decider's or a Handler's context.
func IdentityFrom(ctx context.Context) (seqboxtype.Identity, bool) {
	id, ok := ctx.Value(handoff.IdentityKey{}).(seqboxtype.Identity)
	return id, ok
}
