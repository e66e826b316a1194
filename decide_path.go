package seqbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"go.opentelemetry.io/otel/trace"
)

// outcomeDeciding is what process reaches for a message that stopped
// before its handler to be decided. It is not an outcome (docs/design.md §4): it
// never reaches the inbox, the audit, the metrics or a caller; the message
// runs again once decided and reaches its outcome then.
const outcomeDeciding seqboxtype.Outcome = "deciding"

// decided is the agent path's step between the business key and the
// handler, run only for a consumer with Decide (docs/design.md, "The
// agent path"). It returns the handler's context, carrying the decision
// recorded for this copy, or the failure the handler would meet instead
// (herr: its decision failed, its business key was touched, a crash
// loop); or it stops the message (stopped) while its decision is in
// flight or its business key is busy (wait), when the identity's decision
// belongs to another copy (a collision), or when none is recorded yet
// (awaitDecision).
func (p *pipeline) decided(ctx context.Context, m *message) (hctx context.Context, herr error, stopped *reached, err error) {
	stop := func(r reached, err error) (context.Context, error, *reached, error) { return nil, nil, &r, err }
	herr = m.in.decideErr
	if inFlight := (*decisionInFlight)(nil); errors.As(herr, &inFlight) {
		return stop(p.wait(ctx, m, herr.Error(), inFlight.retryAfter()))
	}
	if w := waiter(nil); errors.As(herr, &w) {
		// A call of it is running in a live caller (effects.InFlightError):
		// waiting for it is no failure and spends no attempt, so a live
		// call never dead-letters its message (the model's guard "ledger:
		// live pending row (wait)", internal/model).
		return stop(p.wait(ctx, m, herr.Error(), min(w.Wait(), p.cfg.Retry.MaxBackoff)))
	}
	if herr == nil {
		reason, err := p.businessKeyBusy(ctx, m.tx, m.ev)
		if err != nil {
			return nil, nil, nil, err
		}
		if reason != "" {
			return stop(p.wait(ctx, m, reason, p.waitForOthers()))
		}
		if herr, err = p.businessKeyTouched(ctx, m.tx, m.ev); err != nil {
			return nil, nil, nil, err
		}
	}
	if herr == nil {
		if herr, err = p.crashLoop(ctx, m); err != nil {
			return nil, nil, nil, err
		}
	}
	if herr != nil {
		return ctx, herr, nil, nil
	}
	hctx, ok, madeFor, err := p.decisionFor(ctx, m.tx, m.ev)
	switch {
	case err != nil:
		return nil, nil, nil, err
	case madeFor != "":
		return stop(p.boundElsewhere(ctx, m, madeFor, "a decision"))
	case !ok:
		return stop(p.awaitDecision(ctx, m))
	}
	return hctx, nil, nil, nil
}

// decisionFor reads the recorded decision for the handler's context; ok
// is false when none is recorded yet (the message must be decided first).
// A decision made for another copy of the identity, with another payload
// hash, is never this copy's: madeFor then names that copy's hash.
func (p *pipeline) decisionFor(ctx context.Context, tx *batchTx, ev seqboxtype.Event) (hctx context.Context, ok bool, madeFor string, err error) {
	d, err := tx.DecisionGet(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID})
	if errors.Is(err, store.ErrNotFound) {
		return ctx, false, "", nil
	}
	if err != nil {
		return ctx, false, "", err
	}
	if !d.MadeFor(ev.Hash) {
		return ctx, false, d.PayloadHash, nil
	}
	return withDecisionValue(ctx, d.Value), true, "", nil
}

// businessKeyBusy reports another identity deciding the effect ev's
// business key asks for: ev waits for it to settle, then is a semantic
// duplicate (it applied) or goes ahead (it failed).
func (p *pipeline) businessKeyBusy(ctx context.Context, tx *batchTx, ev seqboxtype.Event) (string, error) {
	if ev.BusinessKey == "" {
		return "", nil
	}
	other, err := tx.BusinessKeyInFlight(ctx, store.BusinessKeyRef{Consumer: p.cfg.Name, BusinessKey: ev.BusinessKey, Source: ev.Source, ID: ev.ID})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return "", nil
		}
		return "", err
	}
	return fmt.Sprintf("business key %q is being decided under %s/%s; waiting for it", ev.BusinessKey, other.Source, other.ID), nil
}

// businessKeyTouched fails ev for good when another identity of its
// business key settled without applying although its call took effect or
// may have (a dead letter with an uncertain call): asking for the effect
// again could do it twice, and only an operator can tell.
func (p *pipeline) businessKeyTouched(ctx context.Context, tx *batchTx, ev seqboxtype.Event) (error, error) {
	if ev.BusinessKey == "" {
		return nil, nil
	}
	other, err := tx.BusinessKeyTouched(ctx, store.BusinessKeyRef{Consumer: p.cfg.Name, BusinessKey: ev.BusinessKey, Source: ev.Source, ID: ev.ID})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Permanent(fmt.Errorf("business key %q: %s/%s, which settled without applying, made a call for it that took effect or may have "+
		"(seqbox effects list); resolve that, then redrive this", ev.BusinessKey, other.Source, other.ID)), nil
}

// turnBoundElsewhere returns the payload hash of another copy that ev's
// identity's turn is bound to ("" when none is, or it is ev's own), for a
// consumer with Decide (only its messages take turns bound to a payload).
func (p *pipeline) turnBoundElsewhere(ctx context.Context, tx *batchTx, ev seqboxtype.Event) (string, error) {
	bound, err := tx.TurnBoundTo(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID})
	if err != nil || bound == "" || bound == ev.Hash {
		return "", err
	}
	return bound, nil
}

// boundElsewhere ends a copy whose identity's turn or decision (what)
// belongs to another copy, with payload hash other: it is a collision,
// parked for investigation, and nothing of it is decided, dispatched or
// applied. Its writes roll back, the inbox row too: the identity is the
// other copy's, which applies under it in its own time.
func (p *pipeline) boundElsewhere(ctx context.Context, m *message, other, what string) (reached, error) {
	if err := p.rollback(ctx, m); err != nil {
		return reached{}, err
	}
	reason := fmt.Sprintf("%s of this identity belongs to a copy with payload hash %.12s, this one has %.12s", what, other, m.ev.Hash)
	var err error
	m.res, err = p.collide(ctx, m.tx, m.ev, m.res, reason, m.now)
	return p.closeSavepoint(ctx, m, "", err)
}

// awaitDecision stops a message that passed the inbox, the business key
// and the ordering gate but has no recorded decision: its writes roll
// back, it takes its key's turn (so its successors wait behind it, in
// this process and in any other, across a crash) and it is handed to the
// caller to decide outside the transaction.
func (p *pipeline) awaitDecision(ctx context.Context, m *message) (reached, error) {
	// Out of the parked table while it is decided; should this process
	// die first, the sweep lets it out again once the hold passes.
	if bound, err := p.keepTurn(ctx, m, m.now.Add(p.decidingHold()), "next on its key; its decision is being asked", false); err != nil || bound != "" {
		if err != nil {
			return reached{}, err
		}
		return p.boundElsewhere(ctx, m, bound, "its key's turn")
	}
	claim, err := p.preClaim(ctx, m.tx, m.ev, m.now)
	if err != nil {
		return reached{}, err
	}
	m.tx.undecided = append(m.tx.undecided, undecided{in: m.in, ev: m.ev, origin: m.tx.origin, key: "k:" + m.ev.PartitionKey,
		span: trace.SpanContextFromContext(ctx), claim: claim})
	m.res.Outcome, m.res.Reason = outcomeDeciding, "its decision is being asked"
	return p.closeSavepoint(ctx, m, "", nil)
}

// preClaim claims, in the transaction that takes ev's turn, the right to
// decide it, so that its decider need not commit a claim of its own before
// the call. Claimed elsewhere and alive: nothing; the decider finds out.
func (p *pipeline) preClaim(ctx context.Context, tx *batchTx, ev seqboxtype.Event, now time.Time) (preClaim, error) {
	if p.claimOwner == nil {
		return preClaim{}, nil
	}
	owner := p.claimOwner()
	c, err := tx.DecisionClaim(ctx, store.DecisionClaimParams{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID,
		Owner: owner, Now: now, Until: now.Add(claimTTL(p.cfg))})
	if err != nil || !c.Claimed {
		return preClaim{}, err
	}
	return preClaim{owner: owner, at: now}, nil
}

// afterPredecessor stops a message whose key's turn belongs to one this
// batch stopped to be decided: its writes roll back, and it runs again
// once that one is through (the stager keeps a key's messages in order),
// so in-order traffic is not parked behind its own batch-mates.
func (p *pipeline) afterPredecessor(ctx context.Context, m *message) (reached, error) {
	if err := p.undo(ctx, m); err != nil {
		return reached{}, err
	}
	m.tx.undecided = append(m.tx.undecided, undecided{in: m.in, ev: m.ev, origin: m.tx.origin, key: "k:" + m.ev.PartitionKey, after: true})
	m.res.Outcome, m.res.Reason = outcomeDeciding, "runs after its predecessor, which is being decided"
	return p.closeSavepoint(ctx, m, "", nil)
}

// wait sends a message back without counting an attempt: its decision is
// in flight elsewhere, or another identity is deciding the effect its
// business key asks for. It keeps its key's turn meanwhile, so nothing of
// its key overtakes it.
func (p *pipeline) wait(ctx context.Context, m *message, reason string, after time.Duration) (reached, error) {
	// A broker's delivery (not a parked row's run) ends here: it is
	// redelivered after the wait, which the crash-loop bound leaves out.
	if bound, err := p.keepTurn(ctx, m, m.now.Add(after), reason, m.in.parkedRow() == nil); err != nil || bound != "" {
		if err != nil {
			return reached{}, err
		}
		return p.boundElsewhere(ctx, m, bound, "its key's turn")
	}
	m.res.Outcome, m.res.Reason, m.res.RetryAfter = seqboxtype.Retry, reason, after
	return p.closeSavepoint(ctx, m, "", nil)
}

// claimWait is how long a message waits for another process's claim
// that runs out at until: until it runs out (just after), and no longer
// than waitForOthers.
func (p *pipeline) claimWait(until time.Time) time.Duration {
	return min(p.waitForOthers(), max(until.Sub(p.cfg.Now())+claimMargin, 0))
}

// claimMargin is how long after another's claim ran out a waiter looks
// again, so that the claim has run out by the store's clock too.
const claimMargin = 50 * time.Millisecond

// waitForOthers is how long a message waits for another process's
// decision before it looks again: an eighth of DecideTimeout, and at least
// a claim's life, so a dead decider's claim has run out by then.
func (p *pipeline) waitForOthers() time.Duration {
	return max(3*p.cfg.ClaimHeartbeat, p.cfg.DecideTimeout/8)
}
