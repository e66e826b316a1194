package seqbox

import (
	"context"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// unpark is step 7 of the pipeline ("drain" in the external spec): after
// a key's version moved, it takes the parked successors that are now next, in version order, in the same
// transaction. An unparked message that fails transiently goes back to held
// until its backoff has passed (it is no longer at the broker; Sweep
// unparks it again), and unparking stops there; with retryAtOnce (the
// record handler of replay) it is unparked again at once.
func (p *pipeline) unpark(ctx context.Context, tx *batchTx, key string) ([]seqboxtype.Result, error) {
	return p.unparkCarrying(ctx, tx, unparking{key: key}, nil)
}

// unparkCarrying is u's unparking of u.key; decideErr, the outcome of the
// decision of the message u names (u.decided), goes to that message if
// unparking takes it.
func (p *pipeline) unparkCarrying(ctx context.Context, tx *batchTx, u unparking, decideErr error) ([]seqboxtype.Result, error) {
	key, carry := u.key, u.decided != (store.Identity{})
	var out []seqboxtype.Result
	for {
		next, err := p.nextParked(ctx, tx, key)
		if err != nil || next == nil {
			return out, err
		}
		in := input{kind: unparked{row: next}, raw: next.Envelope, attempt: 1}
		if carry && u.decided == (store.Identity{Source: next.Source, ID: next.ID}) {
			in.decideErr, carry = decideErr, false
		}
		r, err := p.process(ctx, tx, in)
		if err != nil {
			return out, err
		}
		results := r.results
		out = append(out, results...)
		if results[0].Outcome == seqboxtype.Retry && p.retryAtOnce {
			// Replay's rule (docs/design.md §17): a retry is redelivered at once,
			// an unparked one too. The next pass takes it again, until it
			// applies or is dead-lettered.
			continue
		}
		if results[0].Outcome == seqboxtype.Retry || results[0].Outcome == outcomeDeciding {
			// It failed transiently: it waits out its backoff as held, and
			// Sweep unparks it again; or it is to be decided outside the
			// transaction first. Its successors keep waiting.
			return out, nil
		}
	}
}

// nextParked returns the parked message of key that may run now: the key
// is not blocked, and the message is unversioned (arrival order), older
// than or equal to the next version (it will be stale), or exactly next.
func (p *pipeline) nextParked(ctx context.Context, tx *batchTx, key string) (*store.Parked, error) {
	ks, err := tx.KeyLock(ctx, store.KeyRef{Consumer: p.cfg.Name, Key: key})
	if err != nil || ks.Blocked {
		return nil, err
	}
	parked, err := tx.ParkedListInLine(ctx, store.KeyRef{Consumer: p.cfg.Name, Key: key})
	if err != nil || len(parked) == 0 {
		return nil, err
	}
	first := parked[0]
	r, retrying, err := tx.retryOnKey(ctx, p.cfg.Name, key)
	if err != nil {
		return nil, err
	}
	if retrying && (r.Source != first.Source || r.ID != first.ID) {
		// The turn's holder, parked itself (its process died while it was
		// decided, or it waits out a backoff), goes first: lower versions
		// that came after it took the turn wait behind it, so the line's
		// order would have it wait for them.
		if holder := parkedIdentity(parked, r.Source, r.ID); holder != nil {
			return holder, nil
		}
		return nil, nil // a predecessor is still retrying at the broker: nobody overtakes it
	}
	expected := p.expectedVersion(ks)
	if first.ObjectVersion == nil || expected < 0 || *first.ObjectVersion <= expected || p.cfg.GapPolicy == GapAdvance {
		// Next in line: unversioned (arrival order), a baseline, exactly
		// next, already passed (it will be stale), or a gap the policy
		// advances over.
		return &first, nil
	}
	// Still a gap. Messages that were blocked behind a key that is now
	// free wait as held again, and messages whose hold ran out while a
	// predecessor held the key's turn (the sweep lets such a hold be: it
	// was no gap then) start their hold now: a hold bounds the wait for a
	// missing version (TestHoldStartsOverOnceThePredecessorIsThrough).
	now := p.cfg.Now()
	deadline := now.Add(p.cfg.HoldTimeout)
	if err := tx.ParkedSetReason(ctx, store.ParkedSetReasonParams{Consumer: p.cfg.Name, Key: key, From: seqboxtype.ParkBlocked, To: seqboxtype.ParkHeld, HoldUntil: deadline}); err != nil {
		return nil, err
	}
	return nil, tx.ParkedStartHolds(ctx, store.ParkedStartHoldsParams{Consumer: p.cfg.Name, Key: key, Until: deadline, Now: now})
}

// parkedIdentity is the parked row of (source, id) in parked, or nil.
func parkedIdentity(parked []store.Parked, source, id string) *store.Parked {
	for i := range parked {
		if parked[i].Source == source && parked[i].ID == id {
			return &parked[i]
		}
	}
	return nil
}

// expectedVersion is the version a key accepts next: one past the
// committed version, FirstVersion for a new key, or -1 when a new key takes
// whatever comes first as its baseline.
func (p *pipeline) expectedVersion(ks store.KeyState) int64 {
	switch {
	case ks.Version != nil:
		return *ks.Version + 1
	case p.cfg.FirstVersion != nil:
		return *p.cfg.FirstVersion
	}
	return -1
}
