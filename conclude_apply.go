package seqbox

import (
	"context"
	"errors"

	"github.com/seqbox/seqbox/store"
)

// concluded ends a message its handler concluded (Conclude): the delivery's
// writes roll back, the identity is kept with the outcome, the key moves
// to the event's version, and the audit says why.
func (p *pipeline) concluded(ctx context.Context, dl *delivery, se *concludedError) (reached, error) {
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
	row.Outcome = se.Outcome
	inserted, err := tx.InboxInsert(ctx, row)
	if err == nil && !inserted {
		err = tx.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID, Outcome: se.Outcome})
	}
	d.Outcome, d.Reason = se.Outcome, "concluded by the handler: "+se.Reason
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

// asConcluded reports a Conclude error.
func asConcluded(err error) (*concludedError, bool) {
	var se *concludedError
	return se, errors.As(err, &se)
}
