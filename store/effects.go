package store

import (
	"errors"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
)

// ErrEffectChanged is DecisionRecord's answer when the effect it was to
// record with the decision is no longer its call's: nothing was recorded.
var ErrEffectChanged = errors.New("the effect's row is no longer this call's: nothing recorded")

// EffectRow is one row of the effects ledger: one external call of an
// identity and action (package effects).
type EffectRow struct {
	Consumer, Source, ID string
	// Action names the call; IdempotencyKey is the key the remote side
	// deduplicates on, unique in the ledger.
	Action, IdempotencyKey string
	State                  seqboxtype.Effect
	// Ref names the effect at the remote side once it succeeded.
	Ref string
	// LastError is the latest error, or an operator's note.
	LastError string
	// Calls counts the calls made (each move to pending).
	Calls                int
	CreatedAt, UpdatedAt time.Time
	// UncertainAt is when the call first turned uncertain; nil if never.
	UncertainAt *time.Time
	// ReconciledAt is when a reconciliation last answered; nil if never.
	ReconciledAt *time.Time
	// LeaseUntil is until when the caller of a pending call vouches for
	// it; nil when never set. The row keeps it after it leaves pending.
	LeaseUntil *time.Time
}

// EffectInsertPendingParams are Executor.EffectInsertPending's: the new
// row is pending with one call, created and updated At.
type EffectInsertPendingParams struct {
	Consumer, Source, ID, Action, IdempotencyKey string
	At, LeaseUntil                               time.Time
}

// EffectTransitionParams are Executor.EffectTransition's.
type EffectTransitionParams struct {
	IdempotencyKey string
	From, To       seqboxtype.Effect
	At             time.Time
	// LeaseUntil is the new lease when To is pending (ignored otherwise).
	LeaseUntil time.Time
}

// EffectRecordParams are Executor.EffectRecord's.
type EffectRecordParams struct {
	IdempotencyKey string
	// From lists the states the row may be in; in any other, it is left
	// alone.
	From      []seqboxtype.Effect
	To        seqboxtype.Effect
	Ref       string
	LastError string
	At        time.Time
	// Reconciled records At as the time a reconciliation answered.
	Reconciled bool
	// Calls, when non-zero, makes the write the calls-th call's own: the
	// row must also have made exactly that many calls, and a row left
	// alone (in another state, or called again since) answers
	// ErrNotFound, so that the caller knows without reading it.
	Calls int
}

// EffectRenewLeaseParams are Executor.EffectRenewLease's.
type EffectRenewLeaseParams struct {
	IdempotencyKey string
	Until          time.Time
}

// EffectListParams are Executor.EffectList's. Empty fields match every
// row.
type EffectListParams struct {
	Consumer, Action string
	// State selects one state, as the operator sees it at Now: pending
	// means a pending row whose lease runs past Now; uncertain also takes
	// a pending row whose lease ran out by Now (its caller died).
	State seqboxtype.Effect
	Now   time.Time
	// Limit bounds the rows returned.
	Limit int
}

// EffectUncertainCount is how many calls of one consumer and action are
// uncertain, and since when the oldest (Executor.EffectCountUncertain).
type EffectUncertainCount struct {
	Consumer, Action string
	Count            int
	// Oldest is the oldest such row's last change.
	Oldest time.Time
}
