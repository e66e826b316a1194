package seqbox

import (
	"context"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
)

// identityKey keys the message's seqboxtype.Identity in a Decider's or
// Handler's context.
type identityKey struct{}

// decisionKey keys the recorded decision ([]byte) in a Handler's context.
type decisionKey struct{}

// withIdentity puts the message's identity into ctx (seqbox.IdentityFrom),
// with its business deadline (zero: none).
func withIdentity(ctx context.Context, consumer string, ev seqboxtype.Event, inTx bool, deadline time.Time) context.Context {
	return context.WithValue(ctx, identityKey{}, seqboxtype.Identity{Consumer: consumer, Source: ev.Source, ID: ev.ID, InTransaction: inTx,
		Deadline: deadline})
}

// withDecision puts a recorded decision into ctx (seqbox.DecisionFrom).
func withDecisionValue(ctx context.Context, d []byte) context.Context {
	return context.WithValue(ctx, decisionKey{}, d)
}

// IdentityFrom returns the identity of the message the context belongs
// to, when it is a Decider's or a Handler's context.
func IdentityFrom(ctx context.Context) (seqboxtype.Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(seqboxtype.Identity)
	return id, ok
}
