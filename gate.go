package seqbox

import (
	"context"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// gateResult is the outcome the ordering gate reached instead of applying.
type gateResult struct {
	Outcome    seqboxtype.Outcome
	Reason     string
	NextAction string
	// beforeBaseline: a stale version below the key's baseline, the first
	// version seen (no FirstVersion configured).
	beforeBaseline bool
	// unpark: the key's version moved, so parked successors may be ready.
	unpark bool
	// after: the key's turn belongs to a message this batch stopped to be
	// decided; this one runs again once that one is through.
	after bool
}

// gapBlockAction is a blocked message's next action when its key is
// blocked by a gap (a hold that timed out) rather than a dead letter.
const gapBlockAction = "release the key (seqbox keys release): it is blocked by a gap, with no dead letter behind it"

// gate is the ordering gate (docs/design.md §6) for an event with a partition key. It
// returns nil when the event may be applied now, or the outcome it reached
// (after parking the event where the outcome says so).
func (p *pipeline) gate(ctx context.Context, tx *batchTx, in input, ev seqboxtype.Event, ks store.KeyState, now time.Time) (*gateResult, error) {
	name, key := p.cfg.Name, ev.PartitionKey
	if ks.Blocked {
		reason := fmt.Sprintf("key blocked since %s: %s", ks.BlockedSince.Format(time.RFC3339), ks.BlockedReason)
		next := "redrive or skip the message blocking the key"
		if ks.BlockedID == "" {
			next = gapBlockAction
		}
		return &gateResult{Outcome: seqboxtype.Blocked, Reason: reason, NextAction: next},
			tx.ParkedInsert(ctx, p.parkRow(ev, seqboxtype.ParkBlocked, reason, now, time.Time{}))
	}
	v, versioned := ev.Version()
	if versioned && ks.Version != nil && v <= *ks.Version {
		// Passed already: no turn of the key can make it apply, so it does
		// not wait behind one (the state-machine test found latecomers
		// parked behind a turn, stalling the key).
		return p.passed(ctx, tx, ev, v, ks, now)
	}
	if in.parkedRow() == nil && ks.HasRetries && !tx.noOtherRetrying(key, store.Identity{Source: ev.Source, ID: ev.ID}) {
		r, retrying, err := tx.retryOnKey(ctx, name, key)
		if err != nil {
			return nil, err
		}
		if retrying && (r.Source != ev.Source || r.ID != ev.ID) {
			if in.parkedRow() == nil && tx.deciding(r.Source, r.ID) {
				// Its predecessor is being decided in this very batch: it
				// runs again after it, instead of parking.
				return &gateResult{after: true}, nil
			}
			reason := fmt.Sprintf("waiting behind %s/%s, which is retrying", r.Source, r.ID)
			return &gateResult{Outcome: seqboxtype.Held, Reason: reason, NextAction: "none: unparked when its predecessor reaches a final outcome"},
				tx.ParkedInsert(ctx, p.parkRow(ev, seqboxtype.ParkHeld, reason, now, now.Add(p.cfg.HoldTimeout)))
		}
	}
	expected := p.expectedVersion(ks)
	if expired, err := p.expiredUndecided(ctx, tx, ev, now); err != nil || expired {
		if err != nil {
			return nil, err
		}
		g := &gateResult{Outcome: seqboxtype.Expired, Reason: p.expiredReason(ev), NextAction: "none: past the business deadline"}
		if versioned && v == expected {
			// The next version expired: record the gap so successors are
			// not held waiting for a version that will never apply.
			g.unpark = true
			return g, p.skipVersions(ctx, tx, key, ks.Version, v, v, "pipeline", "expired: "+g.Reason, now)
		}
		return g, nil
	}
	if !versioned {
		return nil, nil
	}
	switch {
	case expected < 0 || v == expected:
		return nil, nil
	case ks.Version == nil && v < expected:
		return &gateResult{Outcome: seqboxtype.Stale, NextAction: "none: a newer version is already committed",
			Reason: fmt.Sprintf("version %d is older than the committed %s", v, versionText(ks.Version, expected))}, nil
	}
	// A gap: expected < v.
	if p.cfg.GapPolicy == GapAdvance {
		return nil, tx.GapInsert(ctx, store.Gap{Consumer: p.cfg.Name, Key: key, FromVersion: expected, ToVersion: v - 1,
			DecidedBy: "gap_policy=advance", Reason: fmt.Sprintf("version %d arrived while %d was expected", v, expected), At: now})
	}
	reason := fmt.Sprintf("waiting for version %d (got %d)", expected, v)
	return &gateResult{Outcome: seqboxtype.Held, Reason: reason, NextAction: fmt.Sprintf("none until %s: unparked when version %d arrives",
			now.Add(p.cfg.HoldTimeout).Format(time.RFC3339), expected)},
		tx.ParkedInsert(ctx, p.parkRow(ev, seqboxtype.ParkHeld, reason, now, now.Add(p.cfg.HoldTimeout)))
}

// passed is the gate's answer for a version at or below the committed
// one: stale, or version_conflict when another identity committed that
// very version (a recorded gap passing over it is no such identity).
func (p *pipeline) passed(ctx context.Context, tx *batchTx, ev seqboxtype.Event, v int64, ks store.KeyState, now time.Time) (*gateResult, error) {
	committed := *ks.Version
	if b := ks.Baseline; v < committed && p.cfg.FirstVersion == nil && b != nil && v < *b {
		return &gateResult{Outcome: seqboxtype.Stale, beforeBaseline: true,
			NextAction: "none: set FirstVersion (serve --first-version) when the key's versions start at a known number",
			Reason: fmt.Sprintf("version %d arrived after version %d became the key's baseline: with no first version configured, "+
				"a new key starts at the first version seen, and lower versions are stale", v, *b)}, nil
	}
	if v < committed {
		return &gateResult{Outcome: seqboxtype.Stale, NextAction: "none: a newer version is already committed",
			Reason: fmt.Sprintf("version %d is older than the committed version %d", v, committed)}, nil
	}
	skipped, err := tx.GapCovers(ctx, store.GapCoversParams{Consumer: p.cfg.Name, Key: ev.PartitionKey, Version: v})
	if err != nil {
		return nil, err
	}
	if skipped {
		return &gateResult{Outcome: seqboxtype.Stale, NextAction: "none: its version was skipped by a recorded gap",
			Reason: fmt.Sprintf("version %d was passed over by a recorded gap (seqbox keys show %s)", v, ev.PartitionKey)}, nil
	}
	// The inbox has no row of this identity: another identity committed
	// the version, or this one did and retention purged it before this
	// copy came (the key keeps no name of who committed it).
	reason := fmt.Sprintf("version %d is already committed under another identity, or under this one if retention purged it before this redelivery", v)
	return &gateResult{Outcome: seqboxtype.VersionConflict, Reason: reason,
			NextAction: "investigate: two events claim the same version, or the retention is shorter than the redelivery window"},
		tx.ParkedInsert(ctx, p.parkRow(ev, seqboxtype.ParkVersionConflict, reason, now, time.Time{}))
}

func versionText(v *int64, expected int64) string {
	if v == nil {
		return fmt.Sprintf("first version %d", expected)
	}
	return fmt.Sprintf("version %d", *v)
}

// skipVersions records the gap from..to as decided and moves the key's
// version to `to` by compare-and-set from prev.
func (p *pipeline) skipVersions(ctx context.Context, tx *batchTx, key string, prev *int64, from, to int64, who, why string, now time.Time) error {
	if err := tx.GapInsert(ctx, store.Gap{Consumer: p.cfg.Name, Key: key, FromVersion: from, ToVersion: to,
		DecidedBy: who, Reason: why, At: now}); err != nil {
		return err
	}
	ok, err := tx.KeyAdvance(ctx, store.KeyAdvanceParams{Consumer: p.cfg.Name, Key: key, Prev: prev, Next: to, At: now})
	if err == nil && !ok {
		err = errKeyConflict
	}
	return err
}

// errKeyConflict: another consumer advanced the key first; the delivery is
// retried and will meet the new version.
var errKeyConflict = fmt.Errorf("concurrent key conflict: the key version moved under this transaction")
