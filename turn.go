package seqbox

import (
	"context"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// undo takes back what a delivery wrote before it stopped to wait for
// its decision or its predecessor: its savepoint, or, in an optimistic
// run, the inbox row the prefetch inserted for it, which is then all it
// wrote (undoable). Anything else ends the optimistic run (errRerun).
func (p *pipeline) undo(ctx context.Context, m *message) error {
	if !m.tx.optimistic {
		return p.rollback(ctx, m)
	}
	return m.tx.uninsert(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: m.ev.Source, ID: m.ev.ID})
}

// undoable reports whether a batch of a consumer with Decide can run
// optimistically: each of its messages, should it stop before its
// handler (awaitDecision, afterPredecessor, wait), has written nothing
// but the inbox row the prefetch inserted for it, which batchTx.uninsert
// takes back. A message let out of the parked table (it deletes its
// parked row), a redrive (it reopens its identity and may unblock its
// key), one with a business key (apply claims it before the decision is
// looked up), one whose decision failed (its failure is recorded with a
// savepoint), and, under GapAdvance, any (the gate records a gap before
// it passes) write more: their batches run with savepoints.
func (p *pipeline) undoable(ins []input) bool {
	if p.cfg.GapPolicy == GapAdvance {
		return false
	}
	for _, in := range ins {
		if in.parkedRow() != nil || in.redrive() || !in.isMessage() || in.decideErr != nil || in.oversized() != nil ||
			!in.parsed || in.ev.BusinessKey != "" {
			return false
		}
	}
	return true
}

// decidingHold is how long a message let out of the parked table waits
// for its decision before the sweep lets it out again: ten heartbeats of
// the claim, so a decider's crash delays it by seconds, not minutes.
func (p *pipeline) decidingHold() time.Duration { return 10 * p.cfg.ClaimHeartbeat }

// keepTurn rolls the delivery's writes back and has it hold its key's
// turn; a message let out of the parked table goes back as held until
// until, so that the sweep lets it out again should nothing else. When
// the identity's turn is bound to another copy, with another payload
// hash, it takes nothing and returns that hash. waited says the broker's
// delivery ends here in a wait for something running elsewhere, which
// the crash-loop bound leaves out (TurnTakeParams.Waited).
func (p *pipeline) keepTurn(ctx context.Context, m *message, until time.Time, detail string, waited bool) (boundTo string, err error) {
	if err := p.undo(ctx, m); err != nil {
		return "", err
	}
	if bound, err := p.takeTurn(ctx, m.tx, m.ev, m.now, waited); err != nil || bound != "" {
		return bound, err
	}
	row := m.in.parkedRow()
	if row == nil {
		return "", nil
	}
	return "", m.tx.ParkedRehold(ctx, store.ParkedReholdParams{Seq: row.Seq, Until: until, Detail: detail})
}

// takeTurn records that ev holds its key's turn (and reserves its
// business key) until it settles. The turn is bound to ev's payload: when
// another copy of the identity, with another payload hash, holds it,
// nothing changes and that copy's hash is returned.
func (p *pipeline) takeTurn(ctx context.Context, tx *batchTx, ev seqboxtype.Event, now time.Time, waited bool) (boundTo string, err error) {
	bound, err := tx.TurnTake(ctx, store.TurnTakeParams{Consumer: p.cfg.Name, Source: ev.Source, ID: ev.ID,
		PartitionKey: ev.PartitionKey, BusinessKey: ev.BusinessKey, PayloadHash: ev.Hash, At: now, Waited: waited})
	if err != nil || bound == "" || bound == ev.Hash {
		return "", err
	}
	return bound, nil
}
