package seqbox

import (
	"context"
	"errors"

	"github.com/seqbox/seqbox/store"
)

// concluded ends a message its handler concluded (Conclude): the delivery's
// writes roll back, the identity is kept with the outcome, the key moves
// to the event's version, and the audit says why.
func (p *pipeline) concluded(ctx context.Context, m *message, se *concludedError) (reached, error) {
	if err := p.rollback(ctx, m); err != nil {
		return reached{}, err
	}
	if row := m.in.parkedRow(); row != nil {
		if err := m.tx.ParkedDelete(ctx, row.Seq); err != nil {
			return reached{}, err
		}
	}
	row := p.inboxRow(m.ev, m.now)
	row.Outcome = se.Outcome
	inserted, err := m.tx.InboxInsert(ctx, row)
	if err == nil && !inserted {
		err = m.tx.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: p.cfg.Name, Source: m.ev.Source, ID: m.ev.ID, Outcome: se.Outcome})
	}
	m.res.Outcome, m.res.Reason = se.Outcome, "concluded by the handler: "+se.Reason
	if err == nil {
		err = p.record(ctx, m.tx, m.ev, m.res, m.ks.Version, "none: the handler's system holds a newer state", m.now)
	}
	if v, ok := m.ev.Version(); ok && err == nil && m.ev.PartitionKey != "" {
		err = p.advance(ctx, m.tx, m.ev.PartitionKey, m.ks.Version, v, m.now)
	}
	return p.closeSavepoint(ctx, m, m.ev.PartitionKey, err)
}

// asConcluded reports a Conclude error.
func asConcluded(err error) (*concludedError, bool) {
	var se *concludedError
	return se, errors.As(err, &se)
}
