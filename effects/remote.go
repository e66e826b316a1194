package effects

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
)

// Begun is what Begin found or took for a call made by another process
// (an agent behind seqbox serve): the row as it stands, and whether this
// caller now holds it as pending.
type Begun struct {
	Effect
	// Granted: the row is pending for this caller's call, number
	// Effect.Calls; the caller makes the call with Effect.IdempotencyKey,
	// renews the lease (Renew) every Heartbeat while it runs, and reports
	// its answer (Record). Otherwise the row is succeeded and Effect.Ref
	// is its reference: the call is not made again.
	Granted bool
}

// Begin is the first half of Do for a call that another process makes:
// it finds the row of (id, action) and follows the ledger's states as Do
// does, without calling. A succeeded row is returned as it is; a new or
// failed row is taken as pending for the caller (Granted); a live pending
// row is an *InFlightError; an uncertain row (a pending one whose caller's
// lease ran out included) is reconciled with reconcile, and without one
// Begin returns an *UncertainError: the caller asks the remote side and
// reports with Reconciled, or an operator resolves it.
func (l *Ledger) Begin(ctx context.Context, id seqboxtype.Identity, action string, reconcile Reconciler) (Begun, error) {
	if err := checkAction(action); err != nil {
		return Begun{}, err
	}
	if id.Consumer == "" || id.Source == "" || id.ID == "" {
		return Begun{}, fmt.Errorf("effects: identity %+v is incomplete: consumer, source and id are required", id)
	}
	return l.begin(ctx, id, action, reconcile)
}

// ErrNotYours is returned by Record and Renew for a call that does not
// hold its row: no such row, or the row counted another call since (the
// caller's lease ran out and another attempt took it).
var ErrNotYours = errors.New("effects: the row is not this call's")

// Record is the second half of Do for a call another process made: it
// records the answer of the e.Calls-th call of the row e.IdempotencyKey
// (succeeded with ref when callErr is nil, failed when callErr is
// NotApplied or Definite, uncertain otherwise) and returns ref or callErr
// as Do would. An answer that comes after the row was recorded by someone
// else is refused with a *ConflictError, as Do refuses it.
func (l *Ledger) Record(ctx context.Context, e Effect, ref string, callErr error) (string, error) {
	cur, found, err := l.read(ctx, e)
	if err != nil {
		return "", err
	}
	if !found || cur.Calls != e.Calls {
		return "", ErrNotYours
	}
	return l.record(ctx, cur, ref, callErr)
}

// Renew renews the lease of the e.Calls-th call's pending row, as Do's
// heartbeat does, and returns the row. A row that is no longer that
// call's pending one is ErrNotYours.
func (l *Ledger) Renew(ctx context.Context, e Effect) (Effect, error) {
	cur, found, err := l.read(ctx, e)
	if err != nil {
		return Effect{}, err
	}
	if !found || cur.Calls != e.Calls || cur.State != Pending {
		return cur, ErrNotYours
	}
	if err := l.renew(ctx, cur); err != nil {
		return cur, fmt.Errorf("effects: renew %s: %w", e.IdempotencyKey, err)
	}
	return l.reread(ctx, cur)
}

// Reconciled records what another process's reconciliation found for an
// uncertain row (a pending one whose caller's lease ran out included), as
// Do records its Reconciler's answer: applied, the row is succeeded with
// r.Ref; not applied, it is failed and the next Begin calls again, unless
// the uncertain call may still be running at the remote side (less than
// Timeout ago), which is an *UncertainError whose Until says when to ask
// again. A row that is not uncertain is returned as it is. Only open
// calls' keys are indexed: ReconciledFor finds a call whose identity is
// known by its primary key, whatever its state.
func (l *Ledger) Reconciled(ctx context.Context, key string, r Reconciliation) (Effect, error) {
	return l.reconcileRow(ctx, Effect{IdempotencyKey: key}, r)
}

// ReconciledFor is Reconciled for the call of an identity's action.
func (l *Ledger) ReconciledFor(ctx context.Context, id seqboxtype.Identity, action string, r Reconciliation) (Effect, error) {
	return l.reconcileRow(ctx, Effect{Consumer: id.Consumer, Source: id.Source, ID: id.ID, Action: action,
		IdempotencyKey: Key(id.Consumer, id.Source, id.ID, action)}, r)
}

// reconcileRow is Reconciled for the row of call (read by its call when
// it names one, else by its key).
func (l *Ledger) reconcileRow(ctx context.Context, call Effect, r Reconciliation) (Effect, error) {
	e, found, err := l.read(ctx, call)
	if err != nil {
		return Effect{}, err
	}
	if !found {
		return Effect{}, fmt.Errorf("effects: no call has idempotency key %q", call.IdempotencyKey)
	}
	if e.State == Pending && !l.live(e) {
		if err := l.setState(ctx, e, Uncertain, "", "a pending call never reported back (crash, or lease lost mid-call)", Pending); err != nil {
			return Effect{}, err
		}
		if e, _, err = l.read(ctx, e); err != nil {
			return Effect{}, err
		}
	}
	if e.State != Uncertain {
		return e, nil
	}
	if _, _, err := l.reconciled(ctx, e, r); err != nil {
		return e, err
	}
	return l.reread(ctx, e)
}

// GetFor reads the row of an identity's action as the operator sees it,
// by its primary key (Get finds a succeeded call's key by a scan of the
// ledger).
func (l *Ledger) GetFor(ctx context.Context, id seqboxtype.Identity, action string) (Effect, error) {
	return l.reread(ctx, Effect{Consumer: id.Consumer, Source: id.Source, ID: id.ID, Action: action,
		IdempotencyKey: Key(id.Consumer, id.Source, id.ID, action)})
}

// reread reads e's row again as the operator sees it.
func (l *Ledger) reread(ctx context.Context, e Effect) (Effect, error) {
	cur, found, err := l.read(ctx, e)
	if err != nil {
		return Effect{}, err
	}
	if !found {
		return Effect{}, fmt.Errorf("effects: no call has idempotency key %q", e.IdempotencyKey)
	}
	return l.seen(cur), nil
}

// Get reads the row of an idempotency key as the operator sees it (a
// pending call whose caller's lease ran out is uncertain). Only open
// calls' keys are indexed: a succeeded call's key is found by a scan of
// the ledger, and GetFor reads a call whose identity is known by its
// primary key.
func (l *Ledger) Get(ctx context.Context, key string) (Effect, error) {
	return l.reread(ctx, Effect{IdempotencyKey: key})
}

// Heartbeat is how often the caller of a pending call renews its lease.
func (l *Ledger) Heartbeat() time.Duration { return l.cfg.Heartbeat }
