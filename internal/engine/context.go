package engine

import (
	"context"

	"github.com/seqbox/seqbox/internal/handoff"
)

// withIdentity puts the message's identity into ctx (seqbox.IdentityFrom).
func withIdentity(ctx context.Context, consumer string, ev Event, inTx bool) context.Context {
	return context.WithValue(ctx, handoff.IdentityKey{}, Identity{Consumer: consumer, Source: ev.Source, ID: ev.ID, InTransaction: inTx})
}

// withDecision puts a recorded decision into ctx (seqbox.DecisionFrom).
func withDecisionValue(ctx context.Context, d []byte) context.Context {
	return context.WithValue(ctx, handoff.DecisionKey{}, d)
}
