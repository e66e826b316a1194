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
func (p *pipeline) apply(ctx context.Context, m *message) (reached, error) {
	key := m.ev.PartitionKey
	v, versioned := m.ev.Version()
	if m.ev.BusinessKey != "" {
		claimed, err := m.tx.BusinessKeyClaim(ctx, store.BusinessKeyClaimParams{Consumer: p.cfg.Name, BusinessKey: m.ev.BusinessKey, Source: m.ev.Source, ID: m.ev.ID, At: m.now})
		if err != nil {
			return reached{}, err
		}
		if !claimed {
			m.res.Outcome = seqboxtype.SemanticDuplicate
			m.res.Reason = fmt.Sprintf("business key %q was already applied under another identity", m.ev.BusinessKey)
			err := p.record(ctx, m.tx, m.ev, m.res, m.ks.Version, "none: the effect already happened", m.now)
			if err == nil && versioned {
				// The object still moved to this version; only the effect
				// is suppressed, so successors are not held behind it.
				err = p.advance(ctx, m.tx, key, m.ks.Version, v, m.now)
			}
			return p.closeSavepoint(ctx, m, key, err)
		}
	}
	var hctx context.Context
	var herr error
	if p.cfg.Decide == nil {
		hctx = ctx
		var err error
		if herr, err = p.crashLoop(ctx, m); err != nil {
			return reached{}, err
		}
	} else {
		var stopped *reached
		var err error
		if hctx, herr, stopped, err = p.decided(ctx, m); stopped != nil || err != nil {
			if stopped == nil {
				return reached{}, err
			}
			return *stopped, err
		}
	}
	if herr == nil {
		m.resultRef = ""
		herr = m.tx.handle(withResultRef(hctx, &m.resultRef), m.ev, p.runHandler)
	}
	if herr != nil {
		if ctx.Err() != nil {
			return reached{}, ctx.Err() // shutting down: leave it for redelivery
		}
		if se, ok := asConcluded(herr); ok {
			return p.concluded(ctx, m, se)
		}
		return p.failed(ctx, m, herr)
	}
	if err := p.hooks.At(fault.AfterHandler); err != nil {
		return reached{}, err
	}
	if versioned {
		if err := p.advance(ctx, m.tx, key, m.ks.Version, v, m.now); err != nil {
			if !errors.Is(err, errKeyConflict) {
				return reached{}, err
			}
			if err := p.rollback(ctx, m); err != nil {
				return reached{}, err
			}
			m.res.Outcome, m.res.Reason, m.res.KeyConflict = seqboxtype.Retry, err.Error(), true
			return p.closeSavepoint(ctx, m, "", nil)
		}
	}
	processed := m.now
	if err := m.tx.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: p.cfg.Name, Source: m.ev.Source, ID: m.ev.ID, Outcome: seqboxtype.Applied,
		ProcessedAt: &processed, ResultReference: m.resultRef}); err != nil {
		return reached{}, err
	}
	if key == "" || m.ks.HasRetries {
		// Attempts were recorded for this key (or, unkeyed, may have been):
		// this message's are over.
		if err := m.tx.RetryClear(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: m.ev.Source, ID: m.ev.ID}); err != nil {
			return reached{}, err
		}
	}
	m.res.Outcome, m.res.Reason = seqboxtype.Applied, ""
	if !m.ks.HasParked {
		// Nothing waits behind it (the key was read under its lock): no
		// unparking.
		if err := m.tx.SavepointRelease(ctx, m.sp); err != nil {
			return reached{}, err
		}
		return reached{results: []seqboxtype.Result{m.res}}, nil
	}
	return p.closeSavepoint(ctx, m, key, nil)
}

// crashLoopFactor bounds deliveries that never reach an outcome: a message delivered
// this many times MaxAttempts and failing again is dead-lettered, even if
// its failures were never all recorded (each crashed its process).
const crashLoopFactor = 4

// crashLoop fails a message for good once it has been delivered
// crashLoopFactor times MaxAttempts besides the deliveries that ended in a
// wait for a call or a decision running elsewhere (TurnWaits, read only
// past the bound): each attempt killed its process before a failure
// could be recorded. herr is that failure; err the store's.
func (p *pipeline) crashLoop(ctx context.Context, m *message) (herr, err error) {
	// In 64 bits: on a 32-bit int four times MaxRetryAttempts wraps.
	bound := int64(crashLoopFactor) * int64(p.cfg.Retry.MaxAttempts)
	if int64(m.in.attempt) <= bound {
		return nil, nil
	}
	waits, err := m.tx.TurnWaits(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: m.ev.Source, ID: m.ev.ID})
	if err != nil || int64(m.in.attempt)-int64(waits) <= bound {
		return nil, err
	}
	if waits > 0 {
		return Permanent(fmt.Errorf("delivered %d times without settling, %d of them waits for a call or a decision running elsewhere (a crash loop?)",
			m.in.attempt, waits)), nil
	}
	return Permanent(fmt.Errorf("delivered %d times without settling (a crash loop?)", m.in.attempt)), nil
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
	ctx = own.WithTx(ctx, tx.ownTx()) // outbox.Emit and the gateway's envelopes write in it
	if p.cfg.BatchHandler != nil {
		return p.cfg.BatchHandler(withIdentity(ctx, p.cfg.Name, ev, true, time.Time{}), tx.SQL(), []seqboxtype.Event{ev})
	}
	return p.cfg.Handler(withIdentity(ctx, p.cfg.Name, ev, true, time.Time{}), tx.handlerTx(), ev)
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
func (p *pipeline) failed(ctx context.Context, m *message, herr error) (reached, error) {
	if err := p.rollback(ctx, m); err != nil {
		return reached{}, err
	}
	rc, err := m.tx.RetryRecord(ctx, store.RetryRow{Consumer: p.cfg.Name, Source: m.ev.Source, ID: m.ev.ID,
		PartitionKey: m.ev.PartitionKey, Error: herr.Error(), At: m.now})
	attempts, first := rc.Attempts, rc.FirstError
	if err != nil {
		return reached{}, err
	}
	// attempts counts this message's own failures, not the transport's
	// deliveries: those also grow with redeliveries that were not its fault
	// (a batch-mate's store error, a shutdown, a lease that ran out).
	if !IsPermanent(herr) && attempts < p.cfg.Retry.MaxAttempts {
		m.res.Outcome = seqboxtype.Retry
		m.res.Reason = fmt.Sprintf("attempt %d of %d failed: %v", attempts, p.cfg.Retry.MaxAttempts, herr)
		m.res.Attempt = attempts
		backoff := p.cfg.Retry.Backoff(attempts)
		if after, ok := RetryAfterOf(herr); ok && after > backoff {
			// The remote side asked for a later retry: honoured within
			// the backoff cap.
			backoff = min(after, p.cfg.Retry.MaxBackoff)
			m.res.RetryAfter = backoff
		}
		err := m.tx.AuditInsert(ctx, store.AuditRow{Consumer: p.cfg.Name, Source: m.ev.Source, ID: m.ev.ID, PartitionKey: m.ev.PartitionKey,
			ReceivedVersion: m.ev.ObjectVersion, CurrentVersion: m.ks.Version, Outcome: seqboxtype.Retry, Reason: m.res.Reason,
			NextAction: "redelivery after " + backoff.String(), At: m.now})
		if row := m.in.parkedRow(); err == nil && row != nil {
			err = m.tx.ParkedRehold(ctx, store.ParkedReholdParams{Seq: row.Seq, Until: m.now.Add(backoff), Detail: fmt.Sprintf("unparked, then %s; unparked again after %s", m.res.Reason, backoff)})
		}
		return p.closeSavepoint(ctx, m, "", err)
	}
	reason := "permanent failure"
	if !IsPermanent(herr) {
		reason = fmt.Sprintf("attempts exhausted (%d of %d)", attempts, p.cfg.Retry.MaxAttempts)
	}
	m.res.Outcome, m.res.Reason, m.res.Attempt = seqboxtype.DeadLettered, reason+": "+herr.Error(), attempts
	unparkKey, err := p.deadLetter(ctx, m, reason, attempts, first, herr.Error())
	if err == nil {
		err = p.record(ctx, m.tx, m.ev, m.res, m.ks.Version, deadLetterNext(p.cfg, m.ev), m.now)
	}
	return p.closeSavepoint(ctx, m, unparkKey, err)
}

func deadLetterNext(cfg Config, ev seqboxtype.Event) string {
	if ev.PartitionKey != "" && cfg.OnDeadLetter == DeadLetterBlock {
		return "key blocked: redrive or skip the message (seqbox dlq redrive|skip)"
	}
	return "redrive from the DLQ once fixed (seqbox dlq redrive)"
}

// deadLetter moves the original envelope to the DLQ, keeps the identity as
// dead_lettered, and applies OnDeadLetter to the key.
func (p *pipeline) deadLetter(ctx context.Context, m *message, reason string, attempts int, first, last string) (string, error) {
	name := p.cfg.Name
	if row := m.in.parkedRow(); row != nil {
		if err := m.tx.ParkedDelete(ctx, row.Seq); err != nil {
			return "", err
		}
	}
	if _, err := m.tx.DeadLetterInsert(ctx, store.DeadLetter{Consumer: name, Source: m.ev.Source, ID: m.ev.ID,
		PartitionKey: m.ev.PartitionKey, ObjectVersion: m.ev.ObjectVersion, PayloadHash: m.ev.Hash, Envelope: m.ev.Raw,
		Reason: reason, Attempts: attempts, FirstError: first, LastError: last, DeadAt: m.now}); err != nil {
		return "", err
	}
	row := p.inboxRow(m.ev, m.now)
	row.Outcome, row.ProcessedAt = seqboxtype.DeadLettered, &m.now
	inserted, err := m.tx.InboxInsert(ctx, row)
	if err == nil && !inserted {
		err = m.tx.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: name, Source: m.ev.Source, ID: m.ev.ID, Outcome: seqboxtype.DeadLettered, ProcessedAt: &m.now})
	}
	if err == nil {
		err = m.tx.RetryClear(ctx, store.MessageRef{Consumer: name, Source: m.ev.Source, ID: m.ev.ID})
	}
	if err != nil || m.ev.PartitionKey == "" {
		return "", err
	}
	if err := m.tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: name, Key: m.ev.PartitionKey, At: m.now}); err != nil {
		return "", err
	}
	if p.cfg.OnDeadLetter == DeadLetterBlock {
		since := m.now
		if m.in.redrive() && !m.ks.BlockedSince.IsZero() {
			since = m.ks.BlockedSince // a failed redrive: still blocked since the first failure
		}
		if err := m.tx.KeyBlock(ctx, store.KeyBlockParams{Consumer: name, Key: m.ev.PartitionKey, Source: m.ev.Source, ID: m.ev.ID, Reason: "dead-lettered " + m.ev.ID + ": " + reason, At: since}); err != nil {
			return "", err
		}
		return "", m.tx.ParkedSetReason(ctx, store.ParkedSetReasonParams{Consumer: name, Key: m.ev.PartitionKey, From: seqboxtype.ParkHeld, To: seqboxtype.ParkBlocked, HoldUntil: time.Time{}})
	}
	// release: a known gap, and the key goes on.
	if v, ok := m.ev.Version(); ok && (m.ks.Version == nil || v == *m.ks.Version+1) {
		return m.ev.PartitionKey, p.skipVersions(ctx, m.tx, m.ev.PartitionKey, m.ks.Version, v, v, "on_dead_letter=release", reason, m.now)
	}
	return m.ev.PartitionKey, nil
}
