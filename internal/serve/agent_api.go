package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"

	"github.com/seqbox/seqbox/store"
)

// The agent API (docs/agents.md): the steps and effects of the event
// being dispatched, reached with the event's Seqbox-Effects-Token. Both
// are rows of the effects ledger (package effects), the same table and
// state machine as effects.Ledger.Do: an effect under its action name, a
// step under stepPrefix and its name, its result kept as the row's
// reference.
const (
	// stepPrefix starts the ledger action of a step.
	stepPrefix = "step:"
	// maxAgentAPIBody bounds a request of the agent API.
	maxAgentAPIBody = 1 << 20
	// maxStepResult bounds a step's result (compact JSON).
	maxStepResult = 256 << 10
	// maxAgentText bounds an effect's reference and an error text.
	maxAgentText = 4 << 10
)

// agentName is what a step or effect name may be: a letter or digit,
// then up to 63 letters, digits, '.', '_' or '-'.
var agentName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// agentCallKind is a step or an effect.
type agentCallKind string

const (
	kindStep   agentCallKind = "step"
	kindEffect agentCallKind = "effect"
)

// agentCallRequest is the body of a request of the agent API: an
// operation on one step or effect of the event (docs/agents.md).
type agentCallRequest struct {
	// Op is begin (the default), heartbeat, record or reconcile.
	Op string `json:"op"`
	// Call is the call number begin granted (heartbeat, record).
	Call int `json:"call"`
	// State is what the call came to (record): succeeded or failed, or
	// for an effect uncertain.
	State string `json:"state"`
	// Ref is an effect's reference at the remote side (record
	// succeeded; reconcile applied).
	Ref string `json:"ref"`
	// Error says why a call failed or is uncertain (record).
	Error string `json:"error"`
	// Result is a step's result, any JSON value (record succeeded).
	Result json.RawMessage `json:"result"`
	// Applied is what the agent's reconciliation found (reconcile).
	Applied *bool `json:"applied"`
}

// agentCallTarget is the event and the row one request is about.
type agentCallTarget struct {
	kind   agentCallKind
	name   string
	ref    store.MessageRef
	action string
}

// agentStep serves POST /v1/events/{source}/{id}/steps/{name}.
func (s *Server) agentStep(w http.ResponseWriter, r *http.Request) { s.agentCall(w, r, kindStep) }

// agentEffect serves POST /v1/events/{source}/{id}/effects/{action}.
func (s *Server) agentEffect(w http.ResponseWriter, r *http.Request) { s.agentCall(w, r, kindEffect) }

// agentCall checks the token, the name, the body and the event, in that
// order, answering the first that fails with its problem, and then runs
// the operation. A refused request changes nothing.
func (s *Server) agentCall(w http.ResponseWriter, r *http.Request, kind agentCallKind) {
	name := r.PathValue("name")
	if kind == kindEffect {
		name = r.PathValue("action")
	}
	t := agentCallTarget{kind: kind, name: name,
		ref: store.MessageRef{Consumer: s.opt.Consumer, Source: r.PathValue("source"), ID: r.PathValue("id")}}
	token := r.Header.Get(HeaderEffectsToken)
	if token == "" {
		writeProblem(w, r, Problem{Type: ProblemUnauthorized, Status: http.StatusUnauthorized,
			Detail: "missing " + HeaderEffectsToken + " header: the agent API answers only with the token the gateway sent with the event being dispatched"})
		return
	}
	hash, err := s.tokens.check(token, t.ref.Consumer, t.ref.Source, t.ref.ID)
	if err != nil {
		writeProblem(w, r, Problem{Type: ProblemForbidden, Status: http.StatusForbidden, Detail: err.Error(), Source: t.ref.Source, ID: t.ref.ID})
		return
	}
	if !agentName.MatchString(name) || (kind == kindEffect && name == AgentAction) {
		writeProblem(w, r, Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: string(kind),
			Detail: fmt.Sprintf("%s name %q is not allowed: a letter or digit, then up to 63 letters, digits, '.', '_' or '-' (and an effect may not be named %q, the gateway's own call)",
				kind, name, AgentAction)})
		return
	}
	t.action = name
	if kind == kindStep {
		t.action = stepPrefix + name
	}
	req, p := readAgentCall(w, r, kind)
	if p != nil {
		writeProblem(w, r, *p)
		return
	}
	bound, err := s.store.Executor().TurnBoundTo(r.Context(), t.ref)
	if err != nil {
		writeProblem(w, r, Problem{Type: ProblemUnavailable, Status: http.StatusServiceUnavailable, Detail: "read the event's turn: " + err.Error()})
		return
	}
	if bound != hash {
		writeProblem(w, r, Problem{Type: ProblemEventFinal, Status: http.StatusGone, Source: t.ref.Source, ID: t.ref.ID,
			Detail: "the event's outcome is final (applied, dead-lettered, skipped, stale, expired) or it is not being dispatched: its steps and effects are closed"})
		return
	}
	s.agentOp(w, r, t, req)
}

// readAgentCall reads and checks the body of a request of the agent API:
// one JSON object of agentCallRequest's members, whose operation and
// members fit kind.
func readAgentCall(w http.ResponseWriter, r *http.Request, kind agentCallKind) (agentCallRequest, *Problem) {
	var req agentCallRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAgentAPIBody))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return req, &Problem{Type: ProblemTooLarge, Status: http.StatusRequestEntityTooLarge,
				Detail: fmt.Sprintf("the body is over %d bytes", maxAgentAPIBody)}
		}
		return req, &Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Detail: "read the body: " + err.Error()}
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if p := decodeStrict(body, &req); p != nil {
			return req, p
		}
	}
	if req.Op == "" {
		req.Op = "begin"
	}
	bad := func(field, detail string) (agentCallRequest, *Problem) {
		return req, &Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: field, Detail: detail}
	}
	switch req.Op {
	case "begin":
		if req.Call != 0 || req.State != "" || req.Ref != "" || req.Error != "" || req.Result != nil || req.Applied != nil {
			return bad("op", "begin takes no other member")
		}
	case "heartbeat", "record":
		if req.Call < 1 {
			return bad("call", req.Op+" needs the call number begin granted (call ≥ 1)")
		}
		if req.Op == "record" {
			return req, checkRecord(req, kind)
		}
	case "reconcile":
		if kind != kindEffect {
			return bad("op", "reconcile is for effects: a step's lost call is run again")
		}
		if req.Applied == nil {
			return bad("applied", "reconcile needs applied: what the remote side says of the idempotency key")
		}
		if len(req.Ref) > maxAgentText {
			return bad("ref", fmt.Sprintf("ref is over %d bytes", maxAgentText))
		}
	default:
		return bad("op", fmt.Sprintf("op %q is not one of begin, heartbeat, record, reconcile", req.Op))
	}
	return req, nil
}

// checkRecord checks a record's members against kind.
func checkRecord(req agentCallRequest, kind agentCallKind) *Problem {
	bad := func(field, detail string) *Problem {
		return &Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: field, Detail: detail}
	}
	switch {
	case req.State != "succeeded" && req.State != "failed" && (kind == kindStep || req.State != "uncertain"):
		if kind == kindStep {
			return bad("state", fmt.Sprintf("state %q: a step's record is succeeded (with its result) or failed", req.State))
		}
		return bad("state", fmt.Sprintf("state %q: an effect's record is succeeded, failed or uncertain", req.State))
	case kind == kindStep && req.State == "succeeded" && req.Result == nil:
		return bad("result", "a succeeded step needs its result (any JSON value)")
	case kind == kindStep && req.Ref != "":
		return bad("ref", "a step has a result, not a ref")
	case kind == kindEffect && req.Result != nil:
		return bad("result", "an effect has a ref, not a result")
	case req.State != "succeeded" && (req.Result != nil || req.Ref != ""):
		return bad("state", "only a succeeded call has a result or a ref")
	case len(req.Ref) > maxAgentText || len(req.Error) > maxAgentText:
		return bad("ref", fmt.Sprintf("ref and error are at most %d bytes each", maxAgentText))
	case len(req.Result) > maxStepResult:
		return &Problem{Type: ProblemTooLarge, Status: http.StatusRequestEntityTooLarge, Field: "result",
			Detail: fmt.Sprintf("a step's result is at most %d bytes of JSON", maxStepResult)}
	}
	return nil
}

// decodeStrict decodes one JSON object into v, refusing unknown members
// and anything after it.
func decodeStrict(body []byte, v any) *Problem {
	if name := repeatedMember(body); name != "" {
		p := repeatedProblem(name)
		return &p
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: "body", Detail: "the body is not the JSON object expected: " + err.Error()}
	}
	if dec.More() {
		return &Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: "body", Detail: "the body holds more than one JSON value"}
	}
	return nil
}
