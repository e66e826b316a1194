package serve

import (
	"context"
	"encoding/json"
	"time"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
)

// maxAgentWait bounds the wait an agent's agent-waits answer buys.
const maxAgentWait = time.Minute

// waits reads a 503's body: an agent-waits problem naming a step or an
// effect of this event that the ledger shows running in a live caller,
// or uncertain less than the ledger's Timeout ago (it may still be
// running), is a wait of the event, spending no attempt (docs/agents.md,
// "Waiting"). It returns how long, or 0 when the answer is no wait (any
// other 503, or a row that shows no reason to wait: the gateway checks
// the agent's word against the ledger, so an agent cannot hold an event
// for ever without spending its attempts).
func (a *dispatcher) waits(ctx context.Context, ev seqboxtype.Event, body []byte, retryAfter string) time.Duration {
	var p struct {
		Type   string `json:"type"`
		Step   string `json:"step"`
		Effect string `json:"effect"`
	}
	if json.Unmarshal(body, &p) != nil || p.Type != ProblemAgentWaits || (p.Step == "") == (p.Effect == "") {
		return 0
	}
	action := p.Effect
	if p.Step != "" {
		action = stepPrefix + p.Step
	}
	e, err := a.ledger.GetFor(ctx, seqboxtype.Identity{Consumer: a.consumer, Source: ev.Source, ID: ev.ID}, action)
	if err != nil {
		return 0
	}
	now := a.now()
	switch {
	case e.State == effects.Pending && e.LeaseUntil != nil && e.LeaseUntil.After(now):
	case e.State == effects.Uncertain && e.UpdatedAt.Add(a.client.Timeout).After(now):
	default:
		return 0
	}
	w := time.Second
	if after, ok := effects.ParseRetryAfter(retryAfter, now); ok {
		w = after
	}
	return min(max(w, 100*time.Millisecond), maxAgentWait)
}

// agentWaitError is an agent's verified agent-waits answer: a wait of its
// event, not a failure (Wait).
type agentWaitError struct {
	err  error
	wait time.Duration
}

func (e *agentWaitError) Error() string {
	return "the agent waits for a call of this event: " + e.err.Error()
}
func (e *agentWaitError) Unwrap() error { return e.err }

// Wait says the event comes back after the wait, its attempts untouched.
func (e *agentWaitError) Wait() time.Duration { return e.wait }

// drainingError is a dispatch not made because the gateway is shutting
// down: the event comes back later (after the restart), its attempts
// untouched.
type drainingError struct{}

// errDraining is the one drainingError.
var errDraining error = &drainingError{}

func (*drainingError) Error() string {
	return "the gateway is shutting down: the agent is not called now; the event is sent after the restart"
}

// Wait says the event comes back after the restart, its attempts
// untouched.
func (*drainingError) Wait() time.Duration { return agentDownWait }

// drain stops new agent calls and waits, until ctx ends, for the calls
// in flight to finish; it returns how many were still open then.
func (a *dispatcher) drain(ctx context.Context) int64 {
	a.draining.Store(true)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for a.inFlight.Load() > 0 {
		select {
		case <-ctx.Done():
			return a.inFlight.Load()
		case <-t.C:
		}
	}
	return 0
}

// agentDownError is a dispatch that was never sent: no connection to the
// agent was made. The agent is down or not up yet; the event comes back
// after agentDownWait (within Retry.MaxBackoff), its attempts untouched,
// while the failures open the circuit.
type agentDownError struct{ err error }

// agentDownWait is how long a dispatch that was never sent waits.
const agentDownWait = time.Second

func (e *agentDownError) Error() string {
	return "the agent is not reachable, the event was not sent: " + e.err.Error()
}
func (e *agentDownError) Unwrap() error { return e.err }

// Wait says the event comes back after agentDownWait, its attempts
// untouched.
func (e *agentDownError) Wait() time.Duration { return agentDownWait }
