package seqbox

import (
	"context"

	"github.com/seqbox/seqbox/store"
)

// drain is step 7 of DESIGN §3: after a key's version moved, release the
// parked successors that are now next, in version order, in the same
// transaction. A released message that fails transiently is retried at once
// (it is no longer at the broker) until it applies or is dead-lettered.
func (p *pipeline) drain(ctx context.Context, tx *batchTx, key string) ([]Decision, error) {
	var out []Decision
	for {
		next, err := p.nextParked(ctx, tx, key)
		if err != nil || next == nil {
			return out, err
		}
		ds, _, err := p.decide(ctx, tx, input{raw: next.Envelope, attempt: 1, parked: next})
		if err != nil {
			return out, err
		}
		out = append(out, ds...)
	}
}

// nextParked returns the parked message of key that may run now: the key
// is not blocked, and the message is unversioned (arrival order), older
// than or equal to the next version (it will be stale), or exactly next.
func (p *pipeline) nextParked(ctx context.Context, tx *batchTx, key string) (*store.Parked, error) {
	ks, err := tx.Key(ctx, p.cfg.Name, key)
	if err != nil || ks.Blocked {
		return nil, err
	}
	parked, err := tx.ParkedForKey(ctx, p.cfg.Name, key)
	if err != nil || len(parked) == 0 {
		return nil, err
	}
	first := parked[0]
	if first.ObjectVersion == nil {
		return &first, nil
	}
	var expected int64
	switch {
	case ks.Version != nil:
		expected = *ks.Version + 1
	case p.cfg.FirstVersion != nil:
		expected = *p.cfg.FirstVersion
	default:
		return &first, nil
	}
	if *first.ObjectVersion <= expected {
		return &first, nil
	}
	// Still a gap. Messages that were blocked behind a key that is now
	// free wait as held again, with a fresh hold deadline.
	if first.Reason == store.ParkBlocked {
		return nil, tx.SetParkedReason(ctx, p.cfg.Name, key, store.ParkBlocked, store.ParkHeld, p.cfg.Now().Add(p.cfg.HoldTimeout))
	}
	return nil, nil
}
