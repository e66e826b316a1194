package seqbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// Every turn has a way out (docs/design.md §10.1). A message holding its
// key's turn that never comes back (a broker dropped it, a Deliver caller
// gave up) would hold its successors for good. Its turn ends, with the
// message recorded as a skipped dead letter, when:
//   - the broker's redelivery window passed since it was last seen and no
//     decision claim of it is alive: the sweep ends it, and the hold
//     expiry then goes as HoldExpiry says (deadTurn, expireHold);
//   - for a message with no partition key (whose turn only reserves its
//     business key, which no key's hold covers): the broker's redelivery
//     window passed since it was last seen and no decision claim of it is
//     alive: the sweep ends it (endStaleTurns);
//   - an operator releases its key (ReleaseKey), naming who and why,
//     unless it is being decided right now.

// deadTurn reports whether the message holding a key's turn (r) is gone
// for good: not seen for the broker's redelivery window, and not being
// decided.
func (p *pipeline) deadTurn(ctx context.Context, r store.RetryRow, now time.Time) (bool, error) {
	if now.Sub(r.At) < p.cfg.RedeliveryWindow {
		return false, nil
	}
	live, err := p.cfg.Store.Executor().DecisionClaimLive(ctx, store.DecisionClaimParams{Consumer: p.cfg.Name,
		Source: r.Source, ID: r.ID, Now: now})
	// A call of it still open (pending or uncertain) does not keep the
	// turn past the window: the message will not come back to reconcile
	// it, and its successors would wait for good (the chaos harness's
	// dropped-message scenario stalled so). The ended message keeps its
	// business key (endTurn), so another event of that key does not ask
	// for an effect the call may have made. An operator's skip or release
	// within the window waits for the call (callOpen).
	return !live, err
}

// callOpen refuses, with ErrCallOpen naming the call, the message
// (source, id) whose call through the effects ledger is pending or
// uncertain.
func (p *pipeline) callOpen(ctx context.Context, source, id string) error {
	c, err := p.cfg.Store.Executor().LedgerOpen(ctx, store.MessageRef{Consumer: p.cfg.Name, Source: source, ID: id})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	state := c.State
	if state == "pending" {
		state = "pending (in flight, or its caller died and the call is uncertain)"
	}
	return fmt.Errorf("its call %s is %s: %w", c.IdempotencyKey, state, ErrCallOpen)
}

// endTurn ends the turn of the message r on key, which will not come
// back: its row goes, and it is recorded as a dead letter skipped by who
// for why, with its identity recorded dead-lettered, so that should it
// come back after all it does not apply after its successors. Its
// envelope mostly never reached the store (a turn is taken before
// anything of the message is kept), and the dead letter then has none.
// A holder that is itself parked (let out, its call failed, parked again
// with its turn) has: that copy goes with its turn, into the dead letter.
// Left parked, the key's unparking let it out, and it was asked again and
// applied under a dead letter that said skipped
// (TestAReleasedTurnHolderThatIsParkedIsSkippedForGood).
func (p *pipeline) endTurn(ctx context.Context, tx *batchTx, r store.RetryRow, key, who, why string, now time.Time) error {
	ref := store.MessageRef{Consumer: p.cfg.Name, Source: r.Source, ID: r.ID}
	if err := tx.RetryClear(ctx, ref); err != nil {
		return err
	}
	envelope, err := p.unparkEnded(ctx, tx, ref)
	if err != nil {
		return err
	}
	kept := "its envelope never reached the store"
	if len(envelope) > 0 {
		kept = "it was parked: its envelope is kept here"
	}
	reason := fmt.Sprintf("its key's turn was ended by %s: %s (last seen %s; %s)",
		who, why, r.At.Format(time.RFC3339), kept)
	seq, err := tx.DeadLetterInsert(ctx, store.DeadLetter{Consumer: p.cfg.Name, Source: r.Source, ID: r.ID, PartitionKey: key,
		PayloadHash: r.PayloadHash, Envelope: envelope, Reason: reason, FirstError: r.Error, LastError: r.Error, DeadAt: now})
	if err != nil {
		return err
	}
	if err := tx.DeadLetterResolve(ctx, store.DeadLetterResolveParams{Consumer: p.cfg.Name, Seq: seq,
		State: seqboxtype.DeadLetterSkipped, Resolution: "skipped by " + who + ": " + why, At: now}); err != nil {
		return err
	}
	// It keeps its business key: a call of it that took effect (resolved
	// applied) then keeps another event of that key from asking again
	// (BusinessKeyTouched).
	inserted, err := tx.InboxInsert(ctx, store.InboxRow{Consumer: p.cfg.Name, Source: r.Source, ID: r.ID, PayloadHash: r.PayloadHash,
		PartitionKey: key, BusinessKey: r.BusinessKey, Outcome: seqboxtype.DeadLettered, ReceivedAt: now, ProcessedAt: &now, RetentionUntil: now.Add(p.cfg.Retention)})
	if err != nil {
		return err
	}
	if !inserted {
		if err := tx.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: p.cfg.Name, Source: r.Source, ID: r.ID,
			Outcome: seqboxtype.DeadLettered, ProcessedAt: &now}); err != nil {
			return err
		}
	}
	return tx.AuditInsert(ctx, store.AuditRow{Consumer: p.cfg.Name, Source: r.Source, ID: r.ID, PartitionKey: key,
		Outcome: seqboxtype.DeadLettered, Reason: reason, NextAction: "none: its successors go on; the dead letter is resolved as skipped", At: now})
}

// unparkEnded removes the parked copies of a message whose turn ends (a
// holder parked again after its call failed), collisions aside (another
// payload's, kept for the operator), and returns the first one's
// envelope (empty when none was parked).
func (p *pipeline) unparkEnded(ctx context.Context, tx *batchTx, ref store.MessageRef) ([]byte, error) {
	parked, err := tx.ParkedOfIdentity(ctx, ref)
	if err != nil {
		return nil, err
	}
	envelope := []byte{}
	for _, m := range parked {
		if m.Reason == seqboxtype.ParkCollision {
			continue
		}
		if len(envelope) == 0 {
			envelope = m.Envelope
		}
		if err := tx.ParkedDelete(ctx, m.Seq); err != nil {
			return nil, err
		}
	}
	return envelope, nil
}

// staleTurnsPerSweep bounds the turns one sweep ends.
const staleTurnsPerSweep = 100

// endStaleTurns ends the turns of unkeyed messages gone for good
// (deadTurn): not seen for the broker's redelivery window, with no
// decision alive. Another identity of its business key, waiting for it,
// goes ahead on its next delivery. A keyed turn is ended by its held
// successor's hold expiry (expireHold) or an operator's release: a keyed
// message waiting in this process for a slot to be decided in shows no
// claim yet, and its successors wait for it meanwhile, as they should.
func (c *Consumer) endStaleTurns(ctx context.Context) ([]seqboxtype.Result, error) {
	now := c.cfg.Now()
	stale, err := c.cfg.Store.Executor().TurnListStale(ctx, store.TurnListStaleParams{Consumer: c.cfg.Name,
		Before: now.Add(-c.cfg.RedeliveryWindow), Limit: staleTurnsPerSweep})
	if err != nil {
		return nil, err
	}
	var out []seqboxtype.Result
	for _, r := range stale {
		if r.PartitionKey != "" {
			continue
		}
		if dead, err := c.p.deadTurn(ctx, r, now); err != nil || !dead {
			if err != nil {
				return out, err
			}
			continue
		}
		results, err := c.inTx(ctx, "", func(tx *batchTx) ([]seqboxtype.Result, error) {
			// Only if it still holds its turn: it may have come back
			// meanwhile.
			held, err := tx.TurnHeld(ctx, store.MessageRef{Consumer: c.cfg.Name, Source: r.Source, ID: r.ID})
			if err != nil || !held {
				return nil, err
			}
			return nil, c.p.endTurn(ctx, tx, r, r.PartitionKey, "sweep", fmt.Sprintf(
				"not seen for the broker's redelivery window (%s), and no decision of it alive", c.cfg.RedeliveryWindow), now)
		})
		if err != nil {
			return out, err
		}
		out = append(out, results...)
	}
	return out, nil
}
