// Package handoff is the private protocol between seqbox's public types
// (package seqboxtype) and its engine (internal/engine): the context keys
// the engine fills for Deciders and Handlers, and the error a handler
// settles a message with. Nothing outside seqbox can reach it.
package handoff

import (
	"errors"
	"fmt"

	"github.com/seqbox/seqbox/seqboxtype"
)

// IdentityKey keys the message's seqboxtype.Identity in a Decider's or
// Handler's context.
type IdentityKey struct{}

// DecisionKey keys the recorded agent decision ([]byte) in a Handler's
// context.
type DecisionKey struct{}

// Concluded is the error seqbox.Conclude returns: the handler ends the
// message with Outcome (stale or version_conflict) for Reason.
type Concluded struct {
	Outcome seqboxtype.Outcome
	Reason  string
}

func (e *Concluded) Error() string { return fmt.Sprintf("concluded %s: %s", e.Outcome, e.Reason) }

// ErrInvalidConfig is seqboxtype.ErrInvalidConfig: matched by every
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
