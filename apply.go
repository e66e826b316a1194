package seqbox

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// waiter is an error that asks for a wait rather than a failure
// (effects.InFlightError).
type waiter interface {
	error
	Wait() time.Duration
}

// apply runs docs/design.md §5, "Business key", "Handler", "Advance" and
// "Record and unpark", for an event that passed the gate: claim the
// business key, run the handler under its own savepoint, advance the key
// version by compare-and-set and mark the identity applied.
func (p *pipeline) apply(ctx context.Context, dl *delivery) (reached, error) {
	tx, in, ev, ks, d, sp, now := dl.tx, dl.in, dl.ev, dl.ks, dl.d, dl.sp, dl.now
	key := ev.PartitionKey
	v, versioned := ev.Version()
	if ev.BusinessKey != "" {
		claimed, err := tx.BusinessKeyClaim(ctx, store.BusinessKeyClaimParams{Consumer: p.cfg.Name, BusinessKey: ev.BusinessKey, Source: ev.Source, ID: ev.ID, At: now})
		if err != nil {
			return reached{}, err
		}
		if !claimed {
			d.Outcome = seqboxtype.SemanticDuplicate
			d.Reason = fmt.Sprintf("business key %q was already applied under another identity", ev.BusinessKey)
			err := p.record(ctx, tx, ev, d, ks.Version, "none: the effect already happened", now)
			if err == nil && versioned {
				// The object still moved to this version; only the effect
				// is suppressed, so successors are not held behind it.
				err = p.advance(ctx, tx, key, ks.Version, v, now)
			}
			return p.conclude(ctx, dl.with(d, ev, ks), key, err)
		}
	}
	var hctx context.Context
	var herr error
	if p.cfg.Decide == nil {
		hctx, herr = ctx, p.crashLoop(in)
	} else {
		var stopped *reached
		var err error
		if hctx, herr, stopped, err = p.decided(ctx, dl.with(d, ev, ks)); stopped != nil || err != nil {
			if stopped == nil {
				return reached{}, err
			}
			return *stopped, err
		}
	}
	if herr == nil {
		herr = tx.handle(hctx, ev, p.runHandler)
	}
	if herr != nil {
		if ctx.Err() != nil {
			return reached{}, ctx.Err() // shutting down: leave it for redelivery
		}
		if se, ok := asConcluded(herr); ok {
			return p.concluded(ctx, dl.with(d, ev, ks), se)
		}
		return p.failed(ctx, dl.with(d, ev, ks), herr)
	}
	if err := p.hooks.At(fault.AfterHandler); err != nil {
		return reached{}, err
	}
	if versioned {
		if err := p.advance(ctx, tx, key, ks.Version, v, now); err != nil {
			if !errors.Is(err, errKeyConflict) {
				return reached{}, err
			}
			if err := tx.SavepointRollback(ctx, sp); err != nil {
				return reached{}, err
			}
			d.Outcome, d.Reason, d.KeyConflict = seqboxtype.Retry, err.Error(), true
			return p.conclude(ctx, dl.with(d, ev, ks), "", nil)
		}
	}
	processed := now
	if err := tx.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID, Outcome: seqboxtype.Applied, ProcessedAt: &processed}); err != nil {
		return reached{}, err
	}
	if key == "" || ks.HasRetries {
		// Attempts were recorded for this key (or, unkeyed, may have been):
		// this message's are over.
		if err := tx.RetryClear(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID}); err != nil {
			return reached{}, err
		}
	}
	d.Outcome, d.Reason = seqboxtype.Applied, ""
	if !ks.HasParked {
		// Nothing waits behind it (the key was read under its lock): no
		// unparking.
		if err := tx.SavepointRelease(ctx, sp); err != nil {
			return reached{}, err
		}
		return reached{results: []seqboxtype.Result{d}}, nil
	}
	return p.conclude(ctx, dl.with(d, ev, ks), key, nil)
}

// crashLoopFactor bounds deliveries that never reach an outcome: a message delivered
// this many times MaxAttempts and failing again is dead-lettered, even if
// its failures were never all recorded (each crashed its process).
const crashLoopFactor = 4

// crashLoop fails a message for good once it has been delivered
// crashLoopFactor times MaxAttempts: each attempt killed its process
// before a failure could be recorded.
func (p *pipeline) crashLoop(in input) error {
	if in.attempt > crashLoopFactor*p.cfg.Retry.MaxAttempts {
		return Permanent(fmt.Errorf("delivered %d times without settling (a crash loop?)", in.attempt))
	}
	return nil
}

// advance is the compare-and-set of step 6.
func (p *pipeline) advance(ctx context.Context, tx *batchTx, key string, prev *int64, next int64, now time.Time) error {
	ok, err := tx.KeyAdvance(ctx, store.KeyAdvanceParams{Consumer: p.cfg.Name, Key: key, Prev: prev, Next: next, At: now})
	if err == nil && !ok {
		err = errKeyConflict
	}
	return err
}

// runHandler calls the handler, turning a panic into a permanent error so a
// poison message cannot crash the consumer over and over. A BatchHandler
// gets the event alone.
func (p *pipeline) runHandler(ctx context.Context, tx *batchTx, ev seqboxtype.Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if wantsSQLTx(r) && tx.queue != nil {
				// The handler asserted tx.(*sql.Tx): it gets the
				// *sql.Tx from now on, and this batch runs again.
				if !p.directTx.Swap(true) {
					p.cfg.Logger.Warn("seqbox: the handler needs its tx to be a *sql.Tx; its writes are no longer sent together",
						"consumer", p.cfg.Name)
				}
				err = errRerun
				return
			}
			err = panicked(r)
			logPanic(p.cfg, ev, err)
		}
	}()
	ctx = own.WithTx(ctx, tx.tx) // outbox.Emit writes in it
	if p.cfg.BatchHandler != nil {
		return p.cfg.BatchHandler(withIdentity(ctx, p.cfg.Name, ev, true), tx.SQL(), []seqboxtype.Event{ev})
	}
	return p.cfg.Handler(withIdentity(ctx, p.cfg.Name, ev, true), tx.handlerTx(), ev)
}

// recoverHandler turns a handler's panic into a permanent error.
func recoverHandler(err *error) {
	if r := recover(); r != nil {
		*err = panicked(r)
	}
}

// panicked is the permanent error of a handler's panic with value r.
func panicked(r any) error { return recovered("handler", r) }

// wantsSQLTx reports whether the panic r is a failed assertion that a
// queuedTx is some other type (tx.(*sql.Tx)).
func wantsSQLTx(r any) bool {
	te, ok := r.(*runtime.TypeAssertionError)
	return ok && strings.Contains(te.Error(), "*seqbox.queuedTx")
}

// applyDeferred hands the events an optimistic run applied to the
// BatchHandler in one call. Any failure sends the batch to its run with
// savepoints, where each event is handed over alone and its failure is its
// own; a cancelled context abandons the batch.
func (p *pipeline) applyDeferred(ctx context.Context, tx *batchTx) (err error) {
	if len(tx.deferred) == 0 {
		return nil
	}
	defer func() {
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			} else {
				err = errRerun
			}
		}
	}()
	defer recoverHandler(&err)
	return p.cfg.BatchHandler(own.WithTx(ctx, tx.tx), tx.SQL(), tx.deferred)
}

// failed handles a handler error: retry with the attempt counted, or
// dead-letter when the error is permanent or attempts are used up.
func (p *pipeline) failed(ctx context.Context, dl *delivery, herr error) (reached, error) {
	tx, in, ev, ks, d, sp, now := dl.tx, dl.in, dl.ev, dl.ks, dl.d, dl.sp, dl.now
	if err := tx.SavepointRollback(ctx, sp); err != nil {
		return reached{}, err
	}
	rc, err := tx.RetryRecord(ctx, store.RetryRow{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID,
		PartitionKey: ev.PartitionKey, Error: herr.Error(), At: now})
	attempts, first := rc.Attempts, rc.FirstError
	if err != nil {
		return reached{}, err
	}
	// attempts counts this message's own failures, not the transport's
	// deliveries: those also grow with redeliveries that were not its fault
	// (a batch-mate's store error, a shutdown, a lease that ran out).
	if !IsPermanent(herr) && attempts < p.cfg.Retry.MaxAttempts {
		d.Outcome = seqboxtype.Retry
		d.Reason = fmt.Sprintf("attempt %d of %d failed: %v", attempts, p.cfg.Retry.MaxAttempts, herr)
		d.Attempt = attempts
		backoff := p.cfg.Retry.Backoff(attempts)
		if after, ok := RetryAfterOf(herr); ok && after > backoff {
			// The remote side asked for a later retry: honoured within
			// the backoff cap.
			backoff = min(after, p.cfg.Retry.MaxBackoff)
			d.RetryAfter = backoff
		}
		err := tx.AuditInsert(ctx, store.AuditRow{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID, PartitionKey: ev.PartitionKey,
			ReceivedVersion: ev.ObjectVersion, CurrentVersion: ks.Version, Outcome: seqboxtype.Retry, Reason: d.Reason,
			NextAction: "redelivery after " + backoff.String(), At: now})
		if err == nil && in.parked != nil {
			err = tx.ParkedRehold(ctx, store.ParkedReholdParams{Seq: in.parked.Seq, Until: now.Add(backoff), Detail: fmt.Sprintf("released, then %s; released again after %s", d.Reason, backoff)})
		}
		return p.conclude(ctx, dl.with(d, ev, ks), "", err)
	}
	reason := "permanent failure"
	if !IsPermanent(herr) {
		reason = fmt.Sprintf("attempts exhausted (%d of %d)", attempts, p.cfg.Retry.MaxAttempts)
	}
	d.Outcome, d.Reason, d.Attempt = seqboxtype.DeadLettered, reason+": "+herr.Error(), attempts
	unparkKey, err := p.deadLetter(ctx, dl, reason, attempts, first, herr.Error())
	if err == nil {
		err = p.record(ctx, tx, ev, d, ks.Version, deadLetterNext(p.cfg, ev), now)
	}
	return p.conclude(ctx, dl.with(d, ev, ks), unparkKey, err)
}

func deadLetterNext(cfg Config, ev seqboxtype.Event) string {
	if ev.PartitionKey != "" && cfg.OnDeadLetter == DeadLetterBlock {
		return "key blocked: redrive or skip the message (seqbox dlq redrive|skip)"
	}
	return "redrive from the DLQ once fixed (seqbox dlq redrive)"
}

// deadLetter moves the original envelope to the DLQ, keeps the identity as
// dead_lettered, and applies OnDeadLetter to the key.
func (p *pipeline) deadLetter(ctx context.Context, dl *delivery, reason string, attempts int, first, last string) (string, error) {
	tx, in, ev, ks, now := dl.tx, dl.in, dl.ev, dl.ks, dl.now
	name := p.cfg.Name
	if in.parked != nil {
		if err := tx.ParkedDelete(ctx, in.parked.Seq); err != nil {
			return "", err
		}
	}
	if _, err := tx.DeadLetterInsert(ctx, store.DeadLetter{Consumer: name, Source: ev.Source, ID: ev.ID,
		PartitionKey: ev.PartitionKey, ObjectVersion: ev.ObjectVersion, PayloadHash: ev.Hash, Envelope: ev.Raw,
		Reason: reason, Attempts: attempts, FirstError: first, LastError: last, DeadAt: now}); err != nil {
		return "", err
	}
	row := p.inboxRow(ev, now)
	row.Outcome = seqboxtype.DeadLettered
	inserted, err := tx.InboxInsert(ctx, row)
	if err == nil && !inserted {
		err = tx.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: name, Source: ev.Source, ID: ev.ID, Outcome: seqboxtype.DeadLettered, ProcessedAt: nil})
	}
	if err == nil {
		err = tx.RetryClear(ctx, store.MessageRef{Consumer: name, Source: ev.Source, ID: ev.ID})
	}
	if err != nil || ev.PartitionKey == "" {
		return "", err
	}
	if err := tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: name, Key: ev.PartitionKey, At: now}); err != nil {
		return "", err
	}
	if p.cfg.OnDeadLetter == DeadLetterBlock {
		since := now
		if in.redrive && !ks.BlockedSince.IsZero() {
			since = ks.BlockedSince // a failed redrive: still blocked since the first failure
		}
		if err := tx.KeyBlock(ctx, store.KeyBlockParams{Consumer: name, Key: ev.PartitionKey, Source: ev.Source, ID: ev.ID, Reason: "dead-lettered " + ev.ID + ": " + reason, At: since}); err != nil {
			return "", err
		}
		return "", tx.ParkedSetReason(ctx, store.ParkedSetReasonParams{Consumer: name, Key: ev.PartitionKey, From: seqboxtype.ParkHeld, To: seqboxtype.ParkBlocked, HoldUntil: time.Time{}})
	}
	// release: a known gap, and the key goes on.
	if v, ok := ev.Version(); ok && (ks.Version == nil || v == *ks.Version+1) {
		return ev.PartitionKey, p.skipVersions(ctx, tx, ev.PartitionKey, ks.Version, v, v, "on_dead_letter=release", reason, now)
	}
	return ev.PartitionKey, nil
}
