package seqbox

import (
	"context"
	"errors"
	"fmt"
	"github.com/seqbox/seqbox/store"
)

// settleError is what Settle returns.
type settleError struct {
	outcome Outcome
	reason  string
}

func (e *settleError) Error() string { return fmt.Sprintf("settled %s: %s", e.outcome, e.reason) }

// Settle is what a Handler returns when the system it writes to says the
// event is already superseded, which the version gate could not know: an
// agent answering 409 because its object is newer. outcome is Stale or
// VersionConflict. The handler's writes roll back; the identity is kept
// with that outcome (a redelivery is a duplicate), the audit records the
// reason, the message is neither retried nor dead-lettered, and its key
// moves to the event's version, so its successors are not held behind
// it. Any other outcome makes the delivery fail permanently.
func Settle(outcome Outcome, reason string) error {
	if outcome != Stale && outcome != VersionConflict {
		return Permanent(fmt.Errorf("seqbox.Settle(%q): only %s or %s may be settled by a handler", outcome, Stale, VersionConflict))
	}
	return &settleError{outcome: outcome, reason: reason}
}

// settled ends a message its handler settled (Settle): the delivery's
// writes roll back, the identity is kept with the outcome, the key moves
// to the event's version, and the audit says why.
func (p *pipeline) settled(ctx context.Context, dl *delivery, se *settleError) (reached, error) {
	tx, in, ev, ks, d, sp, now := dl.tx, dl.in, dl.ev, dl.ks, dl.d, dl.sp, dl.now
	if err := tx.SavepointRollback(ctx, sp); err != nil {
		return reached{}, err
	}
	if in.parked != nil {
		if err := tx.ParkedDelete(ctx, in.parked.Seq); err != nil {
			return reached{}, err
		}
	}
	row := p.inboxRow(ev, now)
	row.Outcome = se.outcome
	inserted, err := tx.InboxInsert(ctx, row)
	if err == nil && !inserted {
		err = tx.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID, Outcome: se.outcome})
	}
	d.Outcome, d.Reason = se.outcome, "settled by the handler: "+se.reason
	if err == nil {
		err = p.record(ctx, tx, ev, d, ks.Version, "none: the handler's system holds a newer state", now)
	}
	if v, ok := ev.Version(); ok && err == nil && ev.PartitionKey != "" {
		if err = tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: p.cfg.Name, Key: ev.PartitionKey, At: now}); err == nil {
			err = p.advance(ctx, tx, ev.PartitionKey, ks.Version, v, now)
		}
	}
	return p.conclude(ctx, dl.with(d, ev, ks), ev.PartitionKey, err)
}

// asSettled reports a Settle error.
func asSettled(err error) (*settleError, bool) {
	var se *settleError
	return se, errors.As(err, &se)
}
