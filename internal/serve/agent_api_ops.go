package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
)

// agentCallView is every successful answer of the agent API: the row of
// the step or effect as it stands after the operation (docs/agents.md).
type agentCallView struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// State is pending, succeeded, failed or uncertain.
	State string `json:"state"`
	// Granted: this request holds the row as pending for call Call, and
	// makes the call now (renewing its lease every HeartbeatMS, then
	// recording its answer).
	Granted bool `json:"granted"`
	Call    int  `json:"call"`
	// IdempotencyKey is effects.Key(consumer, source, id, action): pass
	// it to the remote side.
	IdempotencyKey string `json:"idempotency_key"`
	// Ref is a succeeded effect's reference at the remote side.
	Ref string `json:"ref,omitempty"`
	// Result is a succeeded step's result.
	Result    json.RawMessage `json:"result,omitempty"`
	LastError string          `json:"last_error,omitempty"`
	// LeaseUntil is until when a pending call's caller vouches for it.
	LeaseUntil  *time.Time `json:"lease_until,omitempty"`
	HeartbeatMS int64      `json:"heartbeat_ms"`
	// RetryAfterMS, when set, says to begin again after it: the call runs
	// in a live caller, or an uncertain one may still be running.
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
}

// agentOp runs one checked operation of the agent API on the ledger row
// of t, in short transactions of the ledger's own (none is open across
// any call of the agent's).
func (s *Server) agentOp(w http.ResponseWriter, r *http.Request, t agentCallTarget, req agentCallRequest) {
	ctx := r.Context()
	id := seqboxtype.Identity{Consumer: t.ref.Consumer, Source: t.ref.Source, ID: t.ref.ID}
	key := effects.Key(id.Consumer, id.Source, id.ID, t.action)
	// The call's row, named by its primary key (the ledger reads it so,
	// not by its key).
	mine := effects.Effect{Consumer: id.Consumer, Source: id.Source, ID: id.ID, Action: t.action, IdempotencyKey: key, Calls: req.Call}
	var (
		err error
		v   agentCallView
	)
	switch req.Op {
	case "begin":
		var rec effects.Reconciler // an effect's uncertain call: the agent reconciles
		if t.kind == kindStep {
			rec = rerunStep
		}
		var b effects.Begun
		b, err = s.ledger.Begin(ctx, id, t.action, rec)
		v.Granted = b.Granted
	case "heartbeat":
		_, err = s.ledger.Renew(ctx, mine)
	case "record":
		_, err = s.ledger.Record(ctx, mine, recordRef(req), recordErr(req))
	case "reconcile":
		_, err = s.ledger.ReconciledFor(ctx, id, t.action, effects.Reconciliation{Applied: *req.Applied, Ref: req.Ref})
	}
	var inFlight *effects.InFlightError
	var uncertain *effects.UncertainError
	var conflict *effects.ConflictError
	switch {
	case errors.Is(err, effects.ErrNotYours) || errors.As(err, &conflict):
		cur, _ := s.ledger.GetFor(ctx, id, t.action)
		writeProblem(w, r, Problem{Type: ProblemConflict, Status: http.StatusConflict, Field: "call",
			Detail: fmt.Sprintf("call %d does not hold this %s any more: it is %s after %d call(s) (%v); begin again", req.Call, t.kind, cur.State, cur.Calls, err)})
		return
	case errors.As(err, &inFlight):
		v.RetryAfterMS = max(time.Until(inFlight.Until), 100*time.Millisecond).Milliseconds()
	case errors.As(err, &uncertain):
		if !uncertain.Until.IsZero() {
			v.RetryAfterMS = max(time.Until(uncertain.Until), 100*time.Millisecond).Milliseconds()
		}
	case err != nil && !(req.Op == "record" && isAnswerErr(err)):
		writeProblem(w, r, Problem{Type: ProblemUnavailable, Status: http.StatusServiceUnavailable, Detail: err.Error()})
		return
	}
	e, err := s.ledger.GetFor(ctx, id, t.action)
	if err != nil {
		writeProblem(w, r, Problem{Type: ProblemUnavailable, Status: http.StatusServiceUnavailable, Detail: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, s.agentView(t, e, v))
}

// agentView fills v from the row e.
func (s *Server) agentView(t agentCallTarget, e effects.Effect, v agentCallView) agentCallView {
	v.Kind, v.Name, v.State, v.Call, v.IdempotencyKey = string(t.kind), t.name, string(e.State), e.Calls, e.IdempotencyKey
	v.LastError, v.HeartbeatMS = e.LastError, s.ledger.Heartbeat().Milliseconds()
	if e.State == effects.Pending {
		v.LeaseUntil = e.LeaseUntil
	}
	if e.State == effects.Succeeded {
		if t.kind == kindStep {
			v.Result = json.RawMessage(e.Ref)
			if !json.Valid(v.Result) {
				// An operator resolved the step by hand with a reference
				// that is not JSON: its result is that text.
				v.Result, _ = json.Marshal(e.Ref)
			}
		} else {
			v.Ref = e.Ref
		}
	}
	return v
}

// rerunStep is a step's reconciliation: a step has no remote side to
// ask, and its lost call's result went with its caller, so it is run
// again (once the ledger's Timeout since it turned uncertain has passed,
// as for any call that may still be running).
func rerunStep(context.Context, effects.Effect) (effects.Reconciliation, error) {
	return effects.Reconciliation{Applied: false}, nil
}

// recordRef is the reference a record keeps: an effect's ref, or a
// step's result as compact JSON.
func recordRef(req agentCallRequest) string {
	if req.Result == nil {
		return req.Ref
	}
	var b bytes.Buffer
	if json.Compact(&b, req.Result) != nil {
		return string(req.Result) // decoded already: valid JSON
	}
	return b.String()
}

// recordErr is the call error a record reports: nil when it succeeded,
// NotApplied when it failed (the next begin calls again), a plain error
// when it is uncertain.
func recordErr(req agentCallRequest) error {
	msg := req.Error
	if msg == "" {
		msg = "the agent reported the call " + req.State
	}
	switch req.State {
	case "succeeded":
		return nil
	case "failed":
		return effects.NotApplied(errors.New(msg))
	}
	return errors.New(msg)
}

// isAnswerErr reports whether err is only the recorded call's own
// failure, returned back by the ledger as Do returns it.
func isAnswerErr(err error) bool {
	var u *effects.UncertainError
	return effects.IsNotApplied(err) || errors.As(err, &u)
}
