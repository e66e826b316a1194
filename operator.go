package seqbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"go.opentelemetry.io/otel/trace"
)

// ErrBlockedByDeadLetter is returned by ReleaseKey for a key blocked behind
// a dead-lettered message: redrive or skip that message instead, so the DLQ
// row is resolved with the decision.
var ErrBlockedByDeadLetter = errors.New("redrive or skip the dead letter instead")

// ErrNotBlocking is returned by Skip for a DLQ message that is already
// resolved.
var ErrNotBlocking = errors.New("dead letter already resolved")

// ErrBeingDecided is returned by Skip for a dead letter whose redrive is
// deciding it right now, and by ReleaseKey for a key whose turn belongs
// to a message being decided right now: try again once its result is in.
var ErrBeingDecided = errors.New("it is being decided right now; try again once its result is in")

// ErrCallOpen is returned by Skip and ReleaseKey (and holds back
// MaxBlock's release) for a message whose call through the effects ledger is pending
// or uncertain: it may be running at the remote side, or have taken
// effect, though its caller is gone. Letting the message's successors go
// would send the next event, or another event of its business key,
// while it may still apply. Wait for the call to end, or resolve it
// (seqbox effects resolve) once the remote side says what became of it.
var ErrCallOpen = errors.New("a call of it through the effects ledger is pending or uncertain: it may still take effect; resolve it first (seqbox effects resolve)")

// ErrDecided is returned by ReleaseKey for a key whose turn belongs to a
// message whose decision is recorded and which has not applied yet (its
// handler failed and it retries, or its apply waits on a lock): ending
// its turn would record as dead-lettered an event the agent acted on, and
// let its successors go before it. It applies when it comes back; should
// it never come back, the sweep ends its turn once the broker's
// redelivery window passes. (A call an operator resolved as succeeded,
// with no decision recorded, is no reason: resolving, then releasing, is
// the way out for a message whose call was left uncertain.)
var ErrDecided = errors.New("its decision is recorded: it applies when it comes back, or the sweep ends its turn once the broker's redelivery window passes")

// Redrive sends DLQ message seq back through the pipeline under its
// original identity. Anything already applied is recognised by the inbox;
// if the message blocked its key, the key is released and its parked
// successors are applied after it, in version order, in the same
// transaction.
func (c *Consumer) Redrive(ctx context.Context, seq int64) ([]seqboxtype.Result, error) {
	letter, err := c.cfg.Store.Executor().DeadLetterGet(ctx, store.DeadLetterRef{Consumer: c.cfg.Name, Seq: seq})
	if err != nil {
		return nil, fmt.Errorf("dlq %d: %w", seq, err)
	}
	if letter.State != seqboxtype.DeadLetterOpen {
		return nil, fmt.Errorf("dlq %d: %w (%s)", seq, ErrNotBlocking, letter.Resolution)
	}
	var decideErr error
	redrive := func(tx *batchTx) ([]seqboxtype.Result, error) {
		results, err := c.p.deliver(ctx, tx, input{kind: redriven{seq: letter.Seq}, raw: letter.Envelope, attempt: 1, decideErr: decideErr})
		if err != nil || results[0].Outcome == seqboxtype.Retry || results[0].Outcome == outcomeDeciding {
			return results, err // still open: redrive again, or once decided
		}
		st, resolution := seqboxtype.DeadLetterRedriven, "redriven"
		switch results[0].Outcome {
		case seqboxtype.Applied:
		case seqboxtype.DeadLettered, seqboxtype.Rejected:
			// Failed again: this row took the failure and keeps its
			// number (DeadLetterInsert), identity or none. Only a row
			// another transaction resolved meanwhile leaves the failure
			// to a row of its own, which holds it now.
			now, err := tx.DeadLetterGet(ctx, store.DeadLetterRef{Consumer: c.cfg.Name, Seq: letter.Seq})
			if err != nil || (now.State == seqboxtype.DeadLetterOpen && now.Redrives > letter.Redrives) {
				return results, err
			}
			st, resolution = seqboxtype.DeadLetterRedriveFailed, "redrive_failed"
		default:
			resolution += ": " + string(results[0].Outcome)
		}
		err = tx.DeadLetterResolve(ctx, store.DeadLetterResolveParams{Consumer: c.cfg.Name, Seq: letter.Seq, State: st, Resolution: resolution, At: c.cfg.Now()})
		if errors.Is(err, store.ErrNotFound) {
			err = fmt.Errorf("dlq %d: %w (by a concurrent redrive or skip)", seq, ErrNotBlocking)
		}
		return results, err
	}
	var out []seqboxtype.Result
	for {
		results, us, err := c.inTxOnce(ctx, fault.DuringRedrive, redrive)
		if err != nil {
			return out, err
		}
		// The redriven message itself stops to be decided when it has no
		// decision yet: it is decided outside the transaction, and the
		// redrive runs again with it. Successors its unparking let out are
		// decided and run through their key's unparking.
		var own *undecided
		var others []undecided
		for _, u := range us {
			if u.in.redrive() {
				own = &u
			} else {
				others = append(others, u)
			}
		}
		out = append(out, final(results)...)
		if len(others) > 0 {
			more, err := c.decideAndApply(ctx, others, nil)
			for _, m := range more {
				out = append(out, m...)
			}
			if err != nil {
				return out, err
			}
		}
		if own == nil {
			break
		}
		decideErr = c.decider.decide(trace.ContextWithSpanContext(ctx, own.span), own.ev, own.claim)
	}
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.Redrives.WithLabelValues(c.cfg.Name).Inc()
	}
	return out, nil
}

// Skip resolves DLQ message seq without applying it: the decision (who and
// why) is recorded as a known gap, the key is released, and the parked
// successors are applied in version order.
func (c *Consumer) Skip(ctx context.Context, seq int64, who, why string) ([]seqboxtype.Result, error) {
	if who == "" || why == "" {
		return nil, fmt.Errorf("skip: who and why are required: the recorded gap must be attributable")
	}
	letter, err := c.cfg.Store.Executor().DeadLetterGet(ctx, store.DeadLetterRef{Consumer: c.cfg.Name, Seq: seq})
	if err != nil {
		return nil, fmt.Errorf("dlq %d: %w", seq, err)
	}
	if letter.State != seqboxtype.DeadLetterOpen {
		return nil, fmt.Errorf("dlq %d: %w (%s)", seq, ErrNotBlocking, letter.Resolution)
	}
	if err := c.inFlight(ctx, letter.Source, letter.ID, c.cfg.Now()); err != nil {
		return nil, fmt.Errorf("dlq %d: %w", seq, err)
	}
	return c.inTx(ctx, "", func(tx *batchTx) ([]seqboxtype.Result, error) {
		now := c.cfg.Now()
		if err := tx.DeadLetterResolve(ctx, store.DeadLetterResolveParams{Consumer: c.cfg.Name, Seq: letter.Seq, State: seqboxtype.DeadLetterSkipped, Resolution: "skipped by " + who + ": " + why, At: now}); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				err = fmt.Errorf("dlq %d: %w (by a concurrent redrive or skip)", seq, ErrNotBlocking)
			}
			return nil, err
		}
		// A failed redrive may have left attempts behind; the message is
		// final now and must not hold its key's successors.
		if err := tx.RetryClear(ctx, store.MessageRef{Consumer: c.cfg.Name, Source: letter.Source, ID: letter.ID}); err != nil {
			return nil, err
		}
		if letter.PartitionKey == "" {
			return nil, nil
		}
		ks, err := tx.KeyLock(ctx, store.KeyRef{Consumer: c.cfg.Name, Key: letter.PartitionKey})
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil // a rejected envelope naming a key never seen: nothing to release
		}
		if err != nil {
			return nil, err
		}
		if !ks.Blocked || ks.BlockedSource != letter.Source || ks.BlockedID != letter.ID {
			return nil, nil
		}
		if letter.ObjectVersion == nil {
			// An unversioned message leaves no version gap: unblock, and
			// let the parked successors go by their own versions.
			if err := tx.KeyUnblock(ctx, store.KeyUnblockParams{Consumer: c.cfg.Name, Key: ks.Key, At: now}); err != nil {
				return nil, err
			}
			return c.p.unpark(ctx, tx, ks.Key)
		}
		return c.p.releaseKey(ctx, tx, ks, letter.ObjectVersion, who, why, now)
	})
}

// ReleaseKey unblocks a key blocked by a gap (hold timeout with
// HoldExpiry=block): the missing versions are recorded as a known gap
// decided by who, and the parked messages apply in version order.
func (c *Consumer) ReleaseKey(ctx context.Context, key, who, why string) ([]seqboxtype.Result, error) {
	if who == "" || why == "" {
		return nil, fmt.Errorf("release: who and why are required: the recorded gap must be attributable")
	}
	return c.inTx(ctx, "", func(tx *batchTx) ([]seqboxtype.Result, error) {
		ks, err := tx.KeyLock(ctx, store.KeyRef{Consumer: c.cfg.Name, Key: key})
		if errors.Is(err, store.ErrNotFound) {
			// A turn whose key has no row (written before a failed
			// message's rollback recreated the key it created,
			// pipeline.rollback) is still released.
			if _, holds, rerr := tx.retryOnKey(ctx, c.cfg.Name, key); rerr == nil && holds {
				ks, _, err = c.p.lockKey(ctx, tx, key, c.cfg.Now())
			}
		}
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		if !ks.Blocked {
			return c.releaseTurn(ctx, tx, ks, who, why)
		}
		if ks.BlockedID != "" {
			return nil, fmt.Errorf("key %q is blocked behind dead-lettered %s/%s: %w", key, ks.BlockedSource, ks.BlockedID, ErrBlockedByDeadLetter)
		}
		return c.p.releaseKey(ctx, tx, ks, nil, who, why, c.cfg.Now())
	})
}

// releaseTurn ends the turn of the message holding key ks, which is not
// blocked, for an operator (who, why): its successors go, with the gap it
// leaves recorded. A message being decided right now keeps its turn.
func (c *Consumer) releaseTurn(ctx context.Context, tx *batchTx, ks store.KeyState, who, why string) ([]seqboxtype.Result, error) {
	r, holds, err := tx.retryOnKey(ctx, c.cfg.Name, ks.Key)
	if err != nil {
		return nil, err
	}
	if !holds {
		return nil, fmt.Errorf("key %q is not blocked, and no message holds its turn", ks.Key)
	}
	now := c.cfg.Now()
	if err := c.inFlight(ctx, r.Source, r.ID, now); err != nil {
		return nil, fmt.Errorf("key %q: its turn belongs to %s/%s: %w", ks.Key, r.Source, r.ID, err)
	}
	if err := decidedNotApplied(ctx, tx, store.MessageRef{Consumer: c.cfg.Name, Source: r.Source, ID: r.ID}); err != nil {
		return nil, fmt.Errorf("key %q: its turn belongs to %s/%s: %w", ks.Key, r.Source, r.ID, err)
	}
	if err := c.p.endTurn(ctx, tx, r, ks.Key, who, why, now); err != nil {
		return nil, err
	}
	return c.p.releaseKey(ctx, tx, ks, nil, who, why, now)
}

// decidedNotApplied refuses, with ErrDecided, the ending of a turn whose
// message has a decision recorded: the agent acted on it, and it applies
// when it comes back.
func decidedNotApplied(ctx context.Context, tx *batchTx, ref store.MessageRef) error {
	_, err := tx.DecisionGet(ctx, ref)
	switch {
	case err == nil:
		return ErrDecided
	case errors.Is(err, store.ErrNotFound):
		return nil
	}
	return err
}

// inFlight refuses an operator's ending of message (source, id), which
// would let its successors go, while it may still reach the agent or take
// effect there: its decision is being asked right now (a live claim:
// ErrBeingDecided; the state-machine test found two events of one key at
// the agent at once), or its call through the ledger is pending or
// uncertain in a process that froze or died, its claim run out
// (ErrCallOpen; an attacker's two gateways).
func (c *Consumer) inFlight(ctx context.Context, source, id string, now time.Time) error {
	live, err := c.cfg.Store.Executor().DecisionClaimLive(ctx, store.DecisionClaimParams{Consumer: c.cfg.Name,
		Source: source, ID: id, Now: now})
	if err != nil {
		return err
	}
	if live {
		return ErrBeingDecided
	}
	return c.p.callOpen(ctx, source, id)
}

// releaseKey unblocks ks. With skipped set, that version is recorded as the
// gap; otherwise the gap runs up to the lowest parked version. Then the key
// unparks.
func (p *pipeline) releaseKey(ctx context.Context, tx *batchTx, ks store.KeyState, skipped *int64, who, why string, now time.Time) ([]seqboxtype.Result, error) {
	if err := tx.KeyUnblock(ctx, store.KeyUnblockParams{Consumer: p.cfg.Name, Key: ks.Key, At: now}); err != nil {
		return nil, err
	}
	to := skipped
	if to == nil {
		parked, err := tx.ParkedListInLine(ctx, store.KeyRef{Consumer: p.cfg.Name, Key: ks.Key})
		if err != nil {
			return nil, err
		}
		if len(parked) > 0 && parked[0].ObjectVersion != nil {
			v := *parked[0].ObjectVersion - 1
			to = &v
		}
	}
	if to != nil && (ks.Version == nil || *to > *ks.Version) {
		from := *to
		switch {
		case ks.Version != nil:
			from = *ks.Version + 1
		case p.cfg.FirstVersion != nil && *p.cfg.FirstVersion <= *to:
			from = *p.cfg.FirstVersion
		}
		if err := p.skipVersions(ctx, tx, ks.Key, ks.Version, from, *to, who, why, now); err != nil {
			return nil, err
		}
	}
	return p.unpark(ctx, tx, ks.Key)
}

// Sweep ends holds that reached HoldTimeout (HoldExpiry decides),
// releases keys blocked longer than MaxBlock, with an alert, and ends the
// turns of unkeyed messages gone for good (not redelivered within the
// redelivery window, no decision alive). It returns the results it
// committed. Run sweeps every second and Maintain once; a consumer driven
// by Deliver that wants only this step of the upkeep calls Sweep.
func (c *Consumer) Sweep(ctx context.Context) ([]seqboxtype.Result, error) {
	out, err := c.endStaleTurns(ctx)
	if err != nil {
		return out, err
	}
	now := c.cfg.Now()
	op := c.cfg.Store.Executor()
	due, err := op.ParkedListDue(ctx, store.ParkedListDueParams{Consumer: c.cfg.Name, Now: now})
	if err != nil {
		return out, err
	}
	for _, h := range due {
		results, err := c.inTx(ctx, "", func(tx *batchTx) ([]seqboxtype.Result, error) {
			return c.p.expireHold(ctx, tx, h, now)
		})
		if err != nil {
			return out, err
		}
		out = append(out, results...)
	}
	if c.cfg.MaxBlock <= 0 {
		return out, nil
	}
	stuck, err := op.KeyListBlockedBefore(ctx, store.KeyListBlockedBeforeParams{Consumer: c.cfg.Name, Before: now.Add(-c.cfg.MaxBlock)})
	if err != nil {
		return out, err
	}
	for _, ks := range stuck {
		why := fmt.Sprintf("blocked since %s, longer than MaxBlock %s", ks.BlockedSince.Format(time.RFC3339), c.cfg.MaxBlock)
		var results []seqboxtype.Result
		if ks.BlockedID != "" {
			results, err = c.skipBlocker(ctx, ks, why)
		} else {
			results, err = c.ReleaseKey(ctx, ks.Key, "max_block", why)
		}
		if errors.Is(err, ErrCallOpen) || errors.Is(err, ErrBeingDecided) {
			// Its blocker's call may still take effect: the key stays
			// blocked until that call ends or an operator resolves it.
			// Said once a minute, not at every sweep.
			if last, ok := c.waitAlerts.Load(ks.Key); !ok || now.Sub(last.(time.Time)) >= time.Minute {
				c.waitAlerts.Store(ks.Key, now)
				c.cfg.Logger.Error("seqbox: ALERT key blocked longer than MaxBlock, not released: its blocker's call is open",
					"consumer", c.cfg.Name, "key", ks.Key, "since", ks.BlockedSince, "err", err)
			}
			continue
		}
		c.waitAlerts.Delete(ks.Key)
		if err != nil {
			return out, err
		}
		c.cfg.Logger.Error("seqbox: ALERT key blocked longer than MaxBlock; released with a recorded gap",
			"consumer", c.cfg.Name, "key", ks.Key, "since", ks.BlockedSince, "reason", ks.BlockedReason)
		if c.cfg.Metrics != nil {
			c.cfg.Metrics.MaxBlockAlerts.WithLabelValues(c.cfg.Name).Inc()
		}
		out = append(out, results...)
	}
	return out, nil
}

// expireHold acts on a hold that DueHolds found due, after checking under
// the key's lock that it still is: the key is not blocked, the held message
// is still the lowest one parked and still past its deadline. A message
// that is next in line (an unparked message whose backoff passed) is simply
// unparked again; a hold behind a predecessor that holds the key's turn
// waits for it; otherwise HoldExpiry decides.
func (p *pipeline) expireHold(ctx context.Context, tx *batchTx, h store.Parked, now time.Time) ([]seqboxtype.Result, error) {
	ks, err := tx.KeyLock(ctx, store.KeyRef{Consumer: p.cfg.Name, Key: h.PartitionKey})
	if err != nil || ks.Blocked {
		return nil, err
	}
	parked, err := tx.ParkedListInLine(ctx, store.KeyRef{Consumer: p.cfg.Name, Key: h.PartitionKey})
	if err != nil || len(parked) == 0 {
		return nil, err
	}
	first := parked[0]
	if first.Seq != h.Seq {
		// Not the lowest parked: it goes now only if it holds the key's
		// turn itself (nextParked lets it out first), its hold still due.
		r, retrying, err := tx.retryOnKey(ctx, p.cfg.Name, h.PartitionKey)
		if err != nil || !retrying || r.Source != h.Source || r.ID != h.ID {
			return nil, err
		}
		if own := parkedIdentity(parked, h.Source, h.ID); own == nil || own.Seq != h.Seq || own.HoldUntil.IsZero() || own.HoldUntil.After(now) {
			return nil, nil // unparked or resolved meanwhile
		}
		return p.unpark(ctx, tx, h.PartitionKey)
	}
	if first.Reason != seqboxtype.ParkHeld || first.HoldUntil.IsZero() || first.HoldUntil.After(now) {
		return nil, nil // unparked or resolved meanwhile
	}
	if next, err := p.nextParked(ctx, tx, h.PartitionKey); err != nil || next != nil {
		if err != nil {
			return nil, err
		}
		return p.unpark(ctx, tx, h.PartitionKey)
	}
	if r, retrying, err := tx.retryOnKey(ctx, p.cfg.Name, h.PartitionKey); err != nil || retrying {
		// A predecessor holds the key's turn (it retries, or is being
		// decided): the hold is not a gap, and its successors wait for it
		// (the state-machine test found the sweep advancing over, or
		// blocking, a message retrying with attempts left), unless it is
		// gone for good (turn_end.go).
		if err != nil {
			return nil, err
		}
		dead, err := p.deadTurn(ctx, r, now)
		if err != nil || !dead {
			return nil, err
		}
		if err := p.endTurn(ctx, tx, r, h.PartitionKey, "hold_expiry", fmt.Sprintf(
			"not seen for the broker's redelivery window (%s), and no decision of it alive", p.cfg.RedeliveryWindow), now); err != nil {
			return nil, err
		}
	}
	why := fmt.Sprintf("hold timed out after %s waiting before version %s", p.cfg.HoldTimeout, versionString(h.ObjectVersion))
	if p.cfg.HoldExpiry == HoldExpiryAdvance {
		return p.releaseKey(ctx, tx, ks, nil, "hold_expiry=advance", why, now)
	}
	if err := tx.KeyBlock(ctx, store.KeyBlockParams{Consumer: p.cfg.Name, Key: h.PartitionKey, Source: "", ID: "", Reason: why, At: now}); err != nil {
		return nil, err
	}
	return nil, tx.ParkedSetReason(ctx, store.ParkedSetReasonParams{Consumer: p.cfg.Name, Key: h.PartitionKey, From: seqboxtype.ParkHeld, To: seqboxtype.ParkBlocked, HoldUntil: time.Time{}})
}

// skipBlocker finds the open DLQ row blocking ks and skips it.
func (c *Consumer) skipBlocker(ctx context.Context, ks store.KeyState, why string) ([]seqboxtype.Result, error) {
	letters, err := c.cfg.Store.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: c.cfg.Name, All: false})
	if err != nil {
		return nil, err
	}
	for _, letter := range letters {
		if letter.Source == ks.BlockedSource && letter.ID == ks.BlockedID {
			return c.Skip(ctx, letter.Seq, "max_block", why)
		}
	}
	return c.inTx(ctx, "", func(tx *batchTx) ([]seqboxtype.Result, error) {
		return c.p.releaseKey(ctx, tx, ks, nil, "max_block", why, c.cfg.Now())
	})
}

func versionString(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}
