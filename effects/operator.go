package effects

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seqbox/seqbox/store"
)

// Filter selects ledger rows for List. Zero fields match everything.
type Filter struct {
	// Consumer selects one consumer's rows.
	Consumer string
	// Action selects one action's rows.
	Action string
	// State selects the rows in one state, as List shows them: uncertain
	// takes a pending row whose lease ran out, and pending only live ones.
	State State
	// Limit caps the rows returned; default 100.
	Limit int
}

// List returns ledger rows, oldest change first.
func (l *Ledger) List(ctx context.Context, f Filter) ([]Effect, error) {
	if f.State != "" && !validState(f.State) {
		return nil, fmt.Errorf("effects: state %q is not one of pending, succeeded, failed, uncertain", f.State)
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	rows, err := l.ex.EffectList(ctx, store.EffectListParams{Consumer: f.Consumer, Action: f.Action, State: f.State,
		Now: l.cfg.Now(), Limit: f.Limit})
	if err != nil {
		return nil, fmt.Errorf("effects: list: %w", err)
	}
	var out []Effect
	for _, r := range rows {
		out = append(out, l.seen(effectOf(r)))
	}
	return out, nil
}

// validState reports whether s is one of the ledger's states.
func validState(s State) bool {
	switch s {
	case Pending, Succeeded, Failed, Uncertain:
		return true
	}
	return false
}

// ErrBeingDecided is returned by Resolve for a call whose message is
// being decided right now (a live decision claim): its decider reconciles
// the call itself; try again once its result is in.
var ErrBeingDecided = errors.New("its message is being decided right now; try again once its result is in")

// Resolve records an uncertain call's outcome by hand, after an operator checked
// the remote side: succeeded with its reference, or failed (the remote
// side has nothing, so the next attempt calls again). why is kept as the
// row's last error, with who. The resolution stands: should the caller of
// the call (one frozen past its lease, not dead) answer afterwards, its
// answer is refused (ConflictError) and the message follows the ledger.
// A caller that answers before the resolution is written keeps its
// answer, and Resolve says so.
func (l *Ledger) Resolve(ctx context.Context, key string, to State, ref, who, why string) error {
	if to != Succeeded && to != Failed {
		return fmt.Errorf("effects: resolve %s to %q: only succeeded or failed", key, to)
	}
	if strings.TrimSpace(who) == "" || strings.TrimSpace(why) == "" {
		return fmt.Errorf("effects: resolve %s: say who resolves it and why", key)
	}
	e, found, err := l.get(ctx, key)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("effects: no call has idempotency key %q", key)
	}
	e = l.seen(e)
	if e.State != Uncertain {
		return fmt.Errorf("effects: %s is %s, not uncertain: nothing to resolve", key, e.State)
	}
	// Its message being decided right now, its decider reconciles the
	// call itself; a resolution under it could let another event of the
	// message's business key go ahead while this one asks again (the
	// protocol's model, internal/model, found that schedule).
	if live, err := l.claims.DecisionClaimLive(ctx, store.DecisionClaimParams{Consumer: e.Consumer, Source: e.Source, ID: e.ID,
		Now: l.cfg.Now()}); err != nil || live {
		if err != nil {
			return err
		}
		return fmt.Errorf("effects: %s: %s/%s is being decided right now, and its decider reconciles the call: %w", key, e.Source, e.ID, ErrBeingDecided)
	}
	// A dead caller's pending row is recorded as an uncertain one (unless
	// its caller came back and reported meanwhile).
	if err := l.setState(ctx, e, Uncertain, "", "a pending call never reported back (its caller's heartbeat stopped)", Pending); err != nil {
		return err
	}
	if err := l.setState(ctx, e, to, ref, fmt.Sprintf("resolved %s by %s: %s", to, who, why), Uncertain); err != nil {
		return err
	}
	// Both writes are conditional: a caller that reported back between
	// the look above and them keeps its answer, and the operator is told
	// that the resolution did not take.
	after, found, err := l.read(ctx, e)
	if err != nil {
		return err
	}
	if to == Failed && found && after.Calls > e.Calls {
		return nil // the next attempt already called again, as failed lets it
	}
	if !found || after.State != to || after.Calls != e.Calls || !strings.HasPrefix(after.LastError, "resolved ") {
		return fmt.Errorf("effects: %s changed while it was being resolved: it is now %s (%s); nothing was resolved", key, after.State, after.LastError)
	}
	return nil
}

// UncertainCount is how many calls of one action are uncertain, and since
// when the oldest.
type UncertainCount struct {
	// Consumer is the consumer whose calls are counted.
	Consumer string
	// Action is the action counted.
	Action string
	// Count is how many of its calls are uncertain, a pending call whose
	// lease ran out included.
	Count int
	// Oldest is the earliest UpdatedAt among them.
	Oldest time.Time
}

// Uncertain counts the uncertain calls by consumer and action.
func (l *Ledger) Uncertain(ctx context.Context) ([]UncertainCount, error) {
	counts, err := l.ex.EffectCountUncertain(ctx, l.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("effects: count uncertain: %w", err)
	}
	var out []UncertainCount
	for _, c := range counts {
		out = append(out, UncertainCount{Consumer: c.Consumer, Action: c.Action, Count: c.Count, Oldest: c.Oldest})
	}
	return out, nil
}

// seen is a row as the operator sees it: a pending call whose caller's
// lease ran out is uncertain.
func (l *Ledger) seen(e Effect) Effect {
	if e.State == Pending && !l.live(e) {
		e.State = Uncertain
		if e.UncertainAt == nil {
			t := e.UpdatedAt
			e.UncertainAt = &t
		}
	}
	return e
}
