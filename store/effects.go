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
	// Consumer, Source and ID are the identity of the message that made
	// the call.
	Consumer, Source, ID string
	// Action names the call; IdempotencyKey is the key the remote side
	// deduplicates on, unique in the ledger.
	Action, IdempotencyKey string
	// State is where the call stands, as stored: a pending row whose
	// lease ran out is still pending here.
	State seqboxtype.Effect
	// Ref names the effect at the remote side once it succeeded.
	Ref string
	// LastError is the latest error, or an operator's note.
	LastError string
	// Calls counts the calls made (each move to pending).
	Calls int
	// CreatedAt is when the row was inserted; UpdatedAt when its state,
	// reference or error last changed (a lease renewal does not count).
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
	// Consumer, Source, ID and Action name the call; IdempotencyKey is its
	// key.
	Consumer, Source, ID, Action, IdempotencyKey string
	// At is when the row is created; LeaseUntil is the first call's lease.
	At, LeaseUntil time.Time
}

// EffectCall names a ledger row by its primary key: the identity of the
// message that made the call, and the call's action.
type EffectCall struct {
	Consumer, Source, ID, Action string
}

// Named reports whether c names a row: all four of its fields are set.
func (c EffectCall) Named() bool {
	return c.Consumer != "" && c.Source != "" && c.ID != "" && c.Action != ""
}

// EffectTransitionParams are Executor.EffectTransition's.
type EffectTransitionParams struct {
	// Call names the row; IdempotencyKey is its key, which the row must
	// have.
	Call           EffectCall
	IdempotencyKey string
	// From is the state the row must be in; To the state it moves to.
	From, To seqboxtype.Effect
	// At is the row's new UpdatedAt.
	At time.Time
	// LeaseUntil is the new lease when To is pending (ignored otherwise).
	LeaseUntil time.Time
}

// EffectRecordParams are Executor.EffectRecord's.
type EffectRecordParams struct {
	// Call names the row; IdempotencyKey is its key, which the row must
	// have.
	Call           EffectCall
	IdempotencyKey string
	// From lists the states the row may be in; in any other, it is left
	// alone.
	From []seqboxtype.Effect
	// To is the state recorded.
	To seqboxtype.Effect
	// Ref replaces the row's reference, empty included.
	Ref string
	// LastError replaces the row's last error, empty included.
	LastError string
	// At is the row's new UpdatedAt, and its UncertainAt when To is
	// uncertain and the row never was.
	At time.Time
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
	// Call names the row; IdempotencyKey is its key, which the row must
	// have.
	Call           EffectCall
	IdempotencyKey string
	// Until is the lease's new end.
	Until time.Time
}

// EffectListParams are Executor.EffectList's. Empty fields match every
// row.
type EffectListParams struct {
	// Consumer and Action select that consumer's and that action's rows.
	Consumer, Action string
	// State selects one state, as the operator sees it at Now: pending
	// means a pending row whose lease runs past Now; uncertain also takes
	// a pending row whose lease ran out by Now (its caller died).
	State seqboxtype.Effect
	// Now is the time State is judged at.
	Now time.Time
	// Limit bounds the rows returned.
	Limit int
}

// EffectUncertainCount is how many calls of one consumer and action are
// uncertain, and since when the oldest (Executor.EffectCountUncertain).
type EffectUncertainCount struct {
	// Consumer and Action name the calls counted.
	Consumer, Action string
	// Count is how many are uncertain, pending ones whose lease ran out
	// included.
	Count int
	// Oldest is the oldest such row's last change.
	Oldest time.Time
}
