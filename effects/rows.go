package effects

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/internal/heartbeat"
	"github.com/seqbox/seqbox/store"
)

// effectOf is a ledger row as an Effect: the lease shows on a pending
// call only.
func effectOf(r store.EffectRow) Effect {
	e := Effect{Consumer: r.Consumer, Source: r.Source, ID: r.ID, Action: r.Action, IdempotencyKey: r.IdempotencyKey,
		State: r.State, Ref: r.Ref, LastError: r.LastError, Calls: r.Calls, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		UncertainAt: r.UncertainAt, ReconciledAt: r.ReconciledAt}
	if e.State == Pending {
		e.LeaseUntil = r.LeaseUntil
	}
	return e
}

// call is the primary key of e's row: its message's identity and its
// action.
func (e Effect) call() store.EffectCall {
	return store.EffectCall{Consumer: e.Consumer, Source: e.Source, ID: e.ID, Action: e.Action}
}

// get reads the row of an idempotency key (the keys of open calls are
// indexed, a succeeded call's is found by a scan: where the call is known,
// read reads it by its primary key).
func (l *Ledger) get(ctx context.Context, key string) (Effect, bool, error) {
	r, err := l.ex.EffectGet(ctx, key)
	return l.found(r, key, err)
}

// read reads e's row by its call, or by its key when e names no call. A
// row of the call under another key is none of e's.
func (l *Ledger) read(ctx context.Context, e Effect) (Effect, bool, error) {
	if !e.call().Named() {
		return l.get(ctx, e.IdempotencyKey)
	}
	r, err := l.ex.EffectGetCall(ctx, e.call())
	if err == nil && e.IdempotencyKey != "" && r.IdempotencyKey != e.IdempotencyKey {
		err = store.ErrNotFound
	}
	return l.found(r, e.IdempotencyKey, err)
}

// found is the row a read returned, false when there was none.
func (l *Ledger) found(r store.EffectRow, key string, err error) (Effect, bool, error) {
	if errors.Is(err, store.ErrNotFound) {
		return Effect{}, false, nil
	}
	if err != nil {
		return Effect{}, false, fmt.Errorf("effects: read %s: %w", key, err)
	}
	return effectOf(r), true, nil
}

// insertPending commits a new pending row; false when the row exists.
func (l *Ledger) insertPending(ctx context.Context, e Effect) (bool, error) {
	now := l.cfg.Now()
	ok, err := l.ex.EffectInsertPending(ctx, store.EffectInsertPendingParams{Consumer: e.Consumer, Source: e.Source, ID: e.ID,
		Action: e.Action, IdempotencyKey: e.IdempotencyKey, At: now, LeaseUntil: now.Add(l.lease())})
	if err != nil {
		return false, fmt.Errorf("effects: record %s pending: %w", e.IdempotencyKey, err)
	}
	return ok, nil
}

// transition moves a row from one state to another; false when it was
// not in from (another member moved it first). Moving to pending counts
// a call.
func (l *Ledger) transition(ctx context.Context, e Effect, from, to State) (bool, error) {
	now := l.cfg.Now()
	ok, err := l.ex.EffectTransition(ctx, store.EffectTransitionParams{Call: e.call(), IdempotencyKey: e.IdempotencyKey, From: from, To: to,
		At: now, LeaseUntil: now.Add(l.lease())})
	if err != nil {
		return false, fmt.Errorf("effects: move %s from %s to %s: %w", e.IdempotencyKey, from, to, err)
	}
	return ok, nil
}

// setState records a call's outcome on a row in one of the states from; a
// row that moved elsewhere meanwhile (succeeded through another member)
// is left alone. The first time a row turns uncertain is kept.
func (l *Ledger) setState(ctx context.Context, e Effect, to State, ref, lastError string, from ...State) error {
	return l.update(ctx, e, to, ref, lastError, false, from...)
}

// update is setState; reconciled also records that a reconciliation
// answered.
func (l *Ledger) update(ctx context.Context, e Effect, to State, ref, lastError string, reconciled bool, from ...State) error {
	err := l.ex.EffectRecord(ctx, store.EffectRecordParams{Call: e.call(), IdempotencyKey: e.IdempotencyKey, From: from, To: to, Ref: ref,
		LastError: lastError, At: l.cfg.Now(), Reconciled: reconciled})
	if err != nil {
		return fmt.Errorf("effects: record %s %s: %w", e.IdempotencyKey, to, err)
	}
	return nil
}

// lease is how long a pending row's caller vouches for it without a
// heartbeat: three heartbeats.
func (l *Ledger) lease() time.Duration { return 3 * l.cfg.Heartbeat }

// heartbeat renews the lease of e's pending row every Heartbeat while
// its call runs, until stop is called.
func (l *Ledger) heartbeat(ctx context.Context, e Effect) (stop func()) {
	return heartbeat.Start(ctx, l.cfg.Heartbeat, func(ctx context.Context) { _ = l.renew(ctx, e) })
}

// renew moves the lease of e's pending row one lease ahead.
func (l *Ledger) renew(ctx context.Context, e Effect) error {
	return l.ex.EffectRenewLease(ctx, store.EffectRenewLeaseParams{Call: e.call(), IdempotencyKey: e.IdempotencyKey,
		Until: l.cfg.Now().Add(l.lease())})
}

// live reports whether a pending row's caller still vouches for it.
func (l *Ledger) live(e Effect) bool {
	return e.State == Pending && e.LeaseUntil != nil && e.LeaseUntil.After(l.cfg.Now())
}
