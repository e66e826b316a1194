// Package handoff holds what the root package hands to seqbox's other
// packages without making it public API: the context keys it fills for
// Deciders and Handlers (the identity, the recorded decision, the batch's
// store transaction for outbox.Emit and the gateway), the error a handler
// concludes a message with, and an oversized input replay records.
// Nothing outside seqbox can reach it.
package handoff

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// IdentityKey keys the message's seqboxtype.Identity in a Decider's or
// Handler's context.
type IdentityKey struct{}

// DecisionKey keys the recorded agent decision ([]byte) in a Handler's
// context.
type DecisionKey struct{}

// TxKey keys the batch's store.ExecutorTx in a Handler's context: the
// driver inside the transaction the handler writes in, for seqbox's own
// writes there (outbox.Emit, the gateway's envelopes).
type TxKey struct{}

// ErrNoTx is returned by Tx's callers when ctx carries no seqbox
// transaction.
var ErrNoTx = errors.New("the context carries no seqbox transaction: call it from a Handler (or BatchHandler) with the ctx the Handler was given")

// WithTx returns ctx carrying tx under TxKey.
func WithTx(ctx context.Context, tx store.ExecutorTx) context.Context {
	return context.WithValue(ctx, TxKey{}, tx)
}

// Tx returns the store transaction ctx carries (TxKey), or ErrNoTx.
func Tx(ctx context.Context) (store.ExecutorTx, error) {
	if tx, ok := ctx.Value(TxKey{}).(store.ExecutorTx); ok && tx != nil {
		return tx, nil
	}
	return nil, ErrNoTx
}

// Concluded is the error seqbox.Conclude returns: the handler ends the
// message with Outcome (stale or version_conflict) for Reason.
type Concluded struct {
	Outcome seqboxtype.Outcome
	Reason  string
}

func (e *Concluded) Error() string { return fmt.Sprintf("concluded %s: %s", e.Outcome, e.Reason) }

// ErrInvalidConfig is seqbox.ErrInvalidConfig: matched by every
// configuration refused, by the types' Validate or by the engine.
var ErrInvalidConfig = errors.New("invalid config")

// InvalidConfig names the field of a configuration that cannot be used,
// and why.
func InvalidConfig(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// Oversized is an input too large to hand over whole, such as a line of a
// file far over MaxEventSize: its first bytes, its full size, and the
// SHA-256 of all of it.
type Oversized struct {
	Prefix []byte
	Size   int64
	SHA256 [32]byte
}
