package seqbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/heartbeat"
	"github.com/seqbox/seqbox/internal/ride"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
	"go.opentelemetry.io/otel/trace"
)

// Decider is the half of an agent's step that runs outside the transaction:
// slow, expensive, non-deterministic. Its result is recorded once per
// identity.
type Decider func(ctx context.Context, ev seqboxtype.Event) ([]byte, error)

// DecisionFrom returns the decision Config.Decide recorded for the event the
// handler is applying.
func DecisionFrom(ctx context.Context) ([]byte, bool) {
	d, ok := ctx.Value(decisionKey{}).([]byte)
	return d, ok
}

// undecided is a message the pipeline stopped before its handler because
// no decision is recorded for it yet (docs/design.md, "The agent path").
// Its transaction gave it its key's turn and rolled the rest back; it is
// decided outside any transaction and then runs again as in.
type undecided struct {
	in input
	ev seqboxtype.Event
	// origin is the index, in the run that stopped it, of the input whose
	// pass stopped it (itself, or the one whose unparking let it out).
	origin int
	// key is its scheduling key; delivery is the broker copy to settle
	// when it runs again (nil for a message let out of the parked table,
	// which runs again through its key's unparking).
	key      string
	delivery transport.Delivery
	// after: not to be decided yet; it runs again once the message
	// holding its key's turn in the same batch is through.
	after bool
	// span is the process span that stopped it: its decision's parent.
	span trace.SpanContext
	// grp is the received batch it belongs to, when Run's decidePipe
	// runs it (nil elsewhere).
	grp *pipeGroup
	// claim is the decision's claim its transaction took with its turn
	// (zero when it took none).
	claim preClaim
}

// preClaim is a decision's claim taken in the transaction that stopped
// its message, with its turn: one commit before the call, not two.
type preClaim struct {
	owner string
	at    time.Time
	// looked: the transaction read the identity's decision after taking
	// the claim (batchTx.lookAfterClaims) and found none; the rest of a
	// look, the identity's inbox row and turn, it held itself.
	looked bool
}

// decider runs Config.Decide for undecided messages: one call per identity
// at a time in this process (copies wait for the call in flight), at most
// DecideConcurrency at once, each under a claim in the store that its
// heartbeat keeps alive, so that no other process asks while it runs and a
// dead decider's claim is taken over within a few heartbeats.
type decider struct {
	c     *Consumer
	slots chan struct{}
	mu    sync.Mutex
	calls map[store.Identity]*decision
	// ended is when this process's last call of an identity ended, kept
	// about two heartbeats (prunedAt: the last time older ones went): a
	// copy whose transaction took the claim before that found the claim
	// its twin's (one owner per process), which the twin's record or
	// unclaim has dropped since (endedSince).
	ended    map[store.Identity]time.Time
	prunedAt time.Time
}

// decision is one Decide in flight in this process.
type decision struct {
	done chan struct{}
	err  error
}

func newDecider(c *Consumer) *decider {
	return &decider{c: c, slots: make(chan struct{}, c.cfg.DecideConcurrency), calls: map[store.Identity]*decision{},
		ended: map[store.Identity]time.Time{}}
}

// decide decides ev unless its decision is recorded, and returns why it
// could not: the error then fails the message in the pipeline.
func (d *decider) decide(ctx context.Context, ev seqboxtype.Event, pre preClaim) error {
	id := store.Identity{Source: ev.Source, ID: ev.ID}
	d.mu.Lock()
	if call, ok := d.calls[id]; ok {
		d.mu.Unlock()
		// A copy of a message being decided here: wait for that call
		// instead of asking again.
		select {
		case <-call.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		return copyDecision(call.err)
	}
	call := &decision{done: make(chan struct{})}
	d.calls[id] = call
	d.mu.Unlock()
	call.err = d.decideOnce(ctx, ev, pre)
	d.mu.Lock()
	delete(d.calls, id)
	d.ended[id] = d.c.cfg.Now()
	d.prune()
	d.mu.Unlock()
	close(call.done)
	return call.err
}

// prune drops, at most once a heartbeat, the ends older than two
// heartbeats: a claim that old is not fresh, so no copy asks about it.
// d.mu is held.
func (d *decider) prune() {
	now, hb := d.c.cfg.Now(), d.c.cfg.ClaimHeartbeat
	if now.Sub(d.prunedAt) < hb {
		return
	}
	d.prunedAt = now
	for id, at := range d.ended {
		if now.Sub(at) > 2*hb {
			delete(d.ended, id)
		}
	}
}

// endedSince reports whether a call of id in this process ended at or
// after at.
func (d *decider) endedSince(id store.Identity, at time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.ended[id]
	return ok && !t.Before(at)
}

// owner names this decider's claims. One name serves all of them: a claim
// is one identity's, and this decider asks for an identity one call at a
// time (decide), so the name only tells processes apart, and two copies
// of a message in this process, each claiming in its own transaction,
// find the claim theirs.
func (d *decider) owner() string { return d.c.claimant }

// decideOnce takes a slot, claims the identity (unless pre, its
// message's transaction, claimed it a moment ago), asks Decide and records
// the decision, dropping the claim with the record.
func (d *decider) decideOnce(ctx context.Context, ev seqboxtype.Event, pre preClaim) error {
	cfg := d.c.cfg
	ref := store.MessageRef{Consumer: cfg.Name, Source: ev.Source, ID: ev.ID}
	op := cfg.Store.Executor()
	// Recorded meanwhile: no slot is spent on it. A message whose own
	// transaction claimed it found no decision there, and no other
	// process records one under its claim; the look after the claim
	// below covers it.
	if pre.owner == "" {
		if _, err := op.DecisionGet(ctx, ref); !errors.Is(err, store.ErrNotFound) {
			return err // recorded meanwhile (nil), or the store failed
		}
	}
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	// The slot is Decide's: it is given back once Decide returns, not
	// after the record (docs/design.md §10.2).
	var freed sync.Once
	free := func() { freed.Do(func() { <-d.slots }) }
	defer free()
	ttl := claimTTL(cfg)
	owner, claimedAt := pre.owner, pre.at
	// A claim younger than a heartbeat has two left before it can run
	// out: it is still this decider's. An older one is taken again (or
	// found taken over), and so is one a twin's call in this process held
	// when the transaction took it, since ended: that call's record or
	// unclaim dropped it (TestCopyWhoseClaimWasItsTwinsLooksBeforeItAsks).
	fresh := owner != "" && cfg.Now().Sub(claimedAt) < cfg.ClaimHeartbeat &&
		!d.endedSince(store.Identity{Source: ev.Source, ID: ev.ID}, claimedAt)
	if !fresh {
		if owner == "" {
			owner = d.owner()
		}
		claimedAt = cfg.Now()
		claim, err := op.DecisionClaim(ctx, store.DecisionClaimParams{Consumer: cfg.Name, Source: ev.Source, ID: ev.ID, Owner: owner, Now: claimedAt, Until: claimedAt.Add(ttl)})
		if err != nil {
			return err
		}
		if !claim.Claimed {
			// Another process is deciding it, and its heartbeat is alive: come
			// back when the decision is likely recorded, or as soon as its
			// claim runs out unrenewed (a dead decider's is taken over then,
			// within its three heartbeats, not a whole waitForOthers later).
			return &decisionInFlight{wait: d.c.p.claimWait(claim.Until)}
		}
	}
	if err := d.c.hooks.At(fault.AfterDecisionClaim); err != nil {
		return err
	}
	var lost atomic.Bool
	stop := d.heartbeat(ctx, store.DecisionClaimParams{Consumer: cfg.Name, Source: ev.Source, ID: ev.ID, Owner: owner}, &lost)
	recorded := false
	defer func() {
		stop()
		if !recorded {
			_ = op.DecisionUnclaim(context.WithoutCancel(ctx), store.DecisionUnclaimParams{Consumer: cfg.Name, Source: ev.Source, ID: ev.ID, Owner: owner})
		}
	}()
	// Recorded while the claim was being taken: nothing to ask. Final
	// elsewhere (dead-lettered and skipped, say) while this copy waited:
	// asking now would reach the agent out of its key's order (the
	// model's guard "claim: settled elsewhere", internal/model); its run
	// again ends a duplicate. One look reads both.
	//
	// Not after a claim its own transaction took less than a heartbeat
	// ago on a store that runs one write transaction at a time: that
	// transaction read no decision and the identity unsettled, and
	// committed the claim with its turn; since then nothing records a
	// decision or settles the identity under a live claim (copies,
	// expiry, skip, release and the sweep all meet it), and nobody may
	// take it over before three heartbeats. A decider that lost an older
	// claim and records its call late is the ledger's to catch, as after
	// a look. On PostgreSQL the transaction's reads are not one snapshot
	// (READ COMMITTED): a decision committed between its read and its
	// claim is seen only by a look after the claim. The transaction
	// reads it itself, in a statement after its claims (pre.looked,
	// batchTx.lookAfterClaims); a claim taken without it is looked at
	// here (docs/design.md §10.1,
	// TestDecisionRecordedWhileTheBatchClaimsIsNotAskedAgainOnPostgres).
	if !fresh || !(d.c.p.serialWriters || pre.looked) {
		look, err := op.DecisionLook(ctx, ref)
		if err != nil || look.Decided || finalElsewhere(look) {
			return err
		}
	}
	// Its business key, looked at again now that it is about to ask: a
	// redriven identity of the same key may have taken it since this copy
	// passed the pipeline (the model's guard "claim: business key taken
	// (second look)", internal/model). Its run again says what to do: wait,
	// semantic_duplicate, or dead letter.
	if busy, err := businessKeyTaken(ctx, op, cfg.Name, ev); busy || err != nil {
		if err != nil {
			return err
		}
		return &decisionInFlight{wait: d.c.p.waitForOthers()}
	}
	// Past its business deadline while it waited for a slot or a claim:
	// not asked. Its run again finds no decision and ends it expired (the
	// deadline is checked before the call, never after it). Unless a call
	// of it took effect or may have (its caller died): Decide runs to
	// resolve that call through the ledger, which makes no new one.
	if d.c.p.isExpired(ev, cfg.Now()) {
		if touched, err := op.LedgerTouched(ctx, ref); err != nil || !touched {
			return err
		}
	}
	// Still its claim? A decider stalled past three heartbeats since it
	// claimed has been taken over; the new owner asks, not this one, so no
	// late ask reaches the agent out of order (the model's guard "ledger:
	// claim taken over before the ask", internal/model).
	// Within a heartbeat of the claim it cannot have been: no write.
	if cfg.Now().Sub(claimedAt) >= cfg.ClaimHeartbeat || lost.Load() {
		if ok, err := op.DecisionClaimExtend(ctx, store.DecisionClaimParams{Consumer: cfg.Name, Source: ev.Source, ID: ev.ID,
			Owner: owner, Until: cfg.Now().Add(ttl)}); err != nil || !ok {
			if err != nil {
				return err
			}
			return &decisionInFlight{wait: d.c.p.waitForOthers()}
		}
	}
	dctx, cancel := context.WithTimeout(withIdentity(ctx, cfg.Name, ev, false, d.c.p.deadline(ev)), cfg.DecideTimeout)
	defer cancel()
	dctx, span := d.c.tr.startDecide(dctx, ev)
	dctx, slot := ride.With(dctx, cfg.Name, ev.Source, ev.ID)
	out, err := callDecide(dctx, cfg.Decide, ev)
	free()
	logPanic(cfg, ev, err)
	endSpan(span, err)
	// The result of its last effects-ledger call rides with the decision
	// (package ride); without a decision to ride with, it is written alone.
	held := slot.Close()
	if err != nil && held != nil {
		if rerr := held.Record(context.WithoutCancel(ctx)); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if taken, lerr := d.claimLost(ctx, ev, owner, claimedAt, &lost); lerr != nil || taken {
			// Its claim was taken over while it ran (or may have been: it
			// could not be read): the new owner decides, and this failure
			// spends no attempt of the message.
			if lerr != nil {
				return &claimUnknownError{decide: err, read: lerr, wait: claimTTL(cfg)}
			}
			return &decisionInFlight{wait: d.c.p.waitForOthers()}
		}
		if errors.Is(err, ErrPastDeadline) {
			return pastDeadline(ctx, op, ref, err)
		}
		return fmt.Errorf("decide: %w", err)
	}
	if out == nil {
		out = []byte{} // decided, with nothing to say: an empty decision
	}
	return d.record(context.WithoutCancel(ctx), store.DecisionRecordParams{Consumer: cfg.Name, Source: ev.Source, ID: ev.ID,
		Decision: out, PayloadHash: ev.Hash, At: cfg.Now(), Owner: owner}, held, &recorded)
}

// pastDeadline settles a Decide the ledger refused a new call past the
// event's deadline (err): with no call of it that took effect or may
// have, nothing was done, and its run again ends it expired; with one (a
// call of another action, made before the deadline), the event is neither
// expired nor decidable, and is dead-lettered for an operator.
func pastDeadline(ctx context.Context, op store.Executor, ref store.MessageRef, err error) error {
	touched, terr := op.LedgerTouched(ctx, ref)
	if terr != nil || !touched {
		return terr
	}
	return Permanent(fmt.Errorf("decide: %w; an earlier call of its decision took effect or may have (seqbox effects list), "+
		"so it is neither expired nor decided again: an operator skips it, or finishes its decision by hand", err))
}

// record records a decision, with its last call's held result in the same
// commit. When that call's row was recorded otherwise meanwhile (an
// operator resolved it, or another attempt took it over once this one's
// lease ran out), the ledger's own record says what stands: a refused
// answer is a wait (effects.ConflictError), and the decision made from it
// is not recorded; a row purged meanwhile refuses nothing, and the
// decision is recorded alone.
func (d *decider) record(ctx context.Context, p store.DecisionRecordParams, held *ride.Held, recorded *bool) error {
	op := d.c.cfg.Store.Executor()
	if held != nil {
		p.Effect = &held.Params
	}
	_, err := op.DecisionRecord(ctx, p)
	if errors.Is(err, store.ErrEffectChanged) {
		if err = held.Record(ctx); err != nil {
			return fmt.Errorf("decide: %w", err)
		}
		p.Effect = nil
		_, err = op.DecisionRecord(ctx, p)
	} else if err != nil && held != nil {
		// Neither was written: the call's result is a fact all the same.
		err = errors.Join(err, held.Record(ctx))
	}
	*recorded = err == nil
	return err
}

// finalElsewhere: the identity has a final outcome in the inbox and no
// turn (a redrive takes one before it decides).
func finalElsewhere(l store.DecisionLook) bool {
	if !l.Seen {
		return false
	}
	switch l.Outcome {
	case seqboxtype.Held, seqboxtype.Blocked, noOutcome: // parked, or left without an outcome by a crash
		return false
	}
	return !l.TurnHeld
}

// businessKeyTaken: another identity applied ev's business key, is
// deciding it ahead of ev, or settled after a call for it took effect or
// may have.
func businessKeyTaken(ctx context.Context, op store.Executor, consumer string, ev seqboxtype.Event) (bool, error) {
	if ev.BusinessKey == "" {
		return false, nil
	}
	ref := store.BusinessKeyRef{Consumer: consumer, BusinessKey: ev.BusinessKey, Source: ev.Source, ID: ev.ID}
	for _, find := range []func(context.Context, store.BusinessKeyRef) (store.Identity, error){op.BusinessKeyInFlight, op.BusinessKeyTouched} {
		if _, err := find(ctx, ref); !errors.Is(err, store.ErrNotFound) {
			return err == nil, err
		}
	}
	return false, nil
}

// callDecide calls the user's Decider, turning a panic into a permanent
// failure of the message rather than the end of the process.
func callDecide(ctx context.Context, decide Decider, ev seqboxtype.Event) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = recovered("decide", r)
		}
	}()
	return decide(ctx, ev)
}

// heartbeat renews a claim every ClaimHeartbeat until stop is called;
// lost is set once the claim turns out taken over.
func (d *decider) heartbeat(ctx context.Context, p store.DecisionClaimParams, lost *atomic.Bool) (stop func()) {
	cfg := d.c.cfg
	return heartbeat.Start(ctx, cfg.ClaimHeartbeat, func(ctx context.Context) {
		p.Until = cfg.Now().Add(claimTTL(cfg))
		if ok, err := cfg.Store.Executor().DecisionClaimExtend(ctx, p); err == nil && !ok {
			lost.Store(true)
			cfg.Logger.Warn("seqbox: a decision's claim was taken over while it ran (its heartbeat was late)",
				"consumer", cfg.Name, "source", p.Source, "id", p.ID)
		}
	})
}

// claimLost reports whether the claim owner took at claimedAt is another's
// now. The heartbeat says so when one of its renewals reached the
// database and found it taken (lost); a renewal that failed (a stalled
// disk, a lost connection) says nothing, so a claim older than a
// heartbeat is renewed once more here to know. A decider whose Decide
// failed asks this before it spends an attempt: one whose claim was taken
// over must not, since on the message's last attempt that would
// dead-letter it while the new owner is asking, whose decision would
// then never apply (TestAFailureAfterTheClaimWasTakenOverSpendsNoAttempt).
func (d *decider) claimLost(ctx context.Context, ev seqboxtype.Event, owner string, claimedAt time.Time, lost *atomic.Bool) (bool, error) {
	cfg := d.c.cfg
	if lost.Load() {
		return true, nil
	}
	if cfg.Now().Sub(claimedAt) < cfg.ClaimHeartbeat {
		return false, nil // younger than a heartbeat: nobody can have taken it
	}
	ok, err := cfg.Store.Executor().DecisionClaimExtend(context.WithoutCancel(ctx), store.DecisionClaimParams{Consumer: cfg.Name,
		Source: ev.Source, ID: ev.ID, Owner: owner, Until: cfg.Now().Add(claimTTL(cfg))})
	return err == nil && !ok, err
}

// claimUnknownError: Decide failed, and whether its claim was still its
// own could not be read. It may have been taken over, so the failure
// spends no attempt (a waiter): the delivery comes back once the claim,
// unrenewed, has run out, or shows a new owner's live one.
type claimUnknownError struct {
	decide, read error
	wait         time.Duration
}

func (e *claimUnknownError) Error() string {
	return fmt.Sprintf("decide: %v; whether its claim is still its own could not be read (%v): trying again in %s without spending an attempt",
		e.decide, e.read, e.wait.Round(time.Millisecond))
}

// Wait is how long the delivery waits before it comes back.
func (e *claimUnknownError) Wait() time.Duration { return max(e.wait, minDecisionWait) }

// claimTTL is how long a claim lives without a heartbeat: three of them.
func claimTTL(cfg Config) time.Duration { return 3 * cfg.ClaimHeartbeat }

// decisionInFlight: another consumer is deciding this identity right
// now. The delivery comes back a while later, without counting as a
// failure: by then the decision is recorded (and usually applied, so the
// copy is a duplicate), or its claim ran out (its decider died) and this
// delivery decides.
type decisionInFlight struct{ wait time.Duration }

func (e *decisionInFlight) Error() string {
	return fmt.Sprintf("its decision is in flight elsewhere; waiting %s for it instead of asking again", e.wait.Round(time.Millisecond))
}

// retryAfter is how long to wait for a decision in flight, at least
// minDecisionWait.
func (e *decisionInFlight) retryAfter() time.Duration { return max(e.wait, minDecisionWait) }

// minDecisionWait is the shortest wait for a decision in flight.
const minDecisionWait = 100 * time.Millisecond
