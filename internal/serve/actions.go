package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// ActionRequest is the body of an admin action: who asks and why, both
// recorded on the operator request. The headers Seqbox-By and
// Seqbox-Reason may carry them instead.
type ActionRequest struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// ActionResult is the answer of an executed admin action: the action's
// result, the one JSON view of it (ops.Acted, which the CLI prints through
// --db and --server), and the decisions alias, which only the API adds.
type ActionResult struct {
	ops.Acted
	// Decisions is Results under its old name, kept for one release as
	// an alias: both members are present, equal (docs/design.md §2).
	Decisions []seqboxtype.Result `json:"decisions"`
}

// maxActionBody bounds an action's body.
const maxActionBody = 16 << 10

// readAction reads who asks and why. attributed actions (skip, release)
// require both: the recorded gap must be attributable.
func readAction(w http.ResponseWriter, r *http.Request, attributed bool) (ActionRequest, bool) {
	var a ActionRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxActionBody))
	if err != nil {
		writeProblem(w, r, Problem{Type: ProblemTooLarge, Status: http.StatusRequestEntityTooLarge, Field: "body",
			Detail: fmt.Sprintf("an action's body is at most %d bytes", maxActionBody)})
		return a, false
	}
	if name := repeatedMember(body); name != "" {
		writeProblem(w, r, repeatedProblem(name))
		return a, false
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			field := "body"
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				field = te.Field
			} else if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
				field = strings.Trim(f, `"`)
			}
			writeProblem(w, r, Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: field,
				Detail: field + ": " + err.Error() + ` (want {"by": "...", "reason": "..."})`})
			return a, false
		}
	}
	if a.By == "" {
		a.By = r.Header.Get("Seqbox-By")
	}
	if a.Reason == "" {
		a.Reason = r.Header.Get("Seqbox-Reason")
	}
	for _, f := range []struct{ name, v string }{{"by", a.By}, {"reason", a.Reason}} {
		if len(f.v) > 1024 {
			writeProblem(w, r, Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: f.name,
				Detail: f.name + ": at most 1024 bytes"})
			return a, false
		}
	}
	if attributed && (blank(a.By) || blank(a.Reason)) {
		field := "by"
		if !blank(a.By) {
			field = "reason"
		}
		writeProblem(w, r, Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: field,
			Detail: field + ": by and reason are required: the recorded gap must be attributable"})
		return a, false
	}
	if blank(a.By) {
		a.By = "admin-api"
	}
	return a, true
}

// openDeadLetter checks that DLQ row seq exists and is open.
func (s *Server) openDeadLetter(w http.ResponseWriter, r *http.Request, seq int64) bool {
	letter, err := s.store.Executor().DeadLetterGet(r.Context(), store.DeadLetterRef{Consumer: s.opt.Consumer, Seq: seq})
	if err != nil {
		s.serverError(w, r, fmt.Errorf("dlq %d: %w", seq, err))
		return false
	}
	if letter.State != seqboxtype.DeadLetterOpen {
		writeProblem(w, r, Problem{Type: ProblemConflict, Status: http.StatusConflict, Field: "seq",
			Detail: fmt.Sprintf("dlq %d is already resolved: %s", seq, letter.Resolution)})
		return false
	}
	return true
}

func (s *Server) redrive(w http.ResponseWriter, r *http.Request) {
	seq, ok := pathSeq(w, r)
	if !ok {
		return
	}
	a, ok := readAction(w, r, false)
	if !ok || !s.openDeadLetter(w, r, seq) {
		return
	}
	s.act(w, r, store.ActionRedrive, itoa(seq), a)
}

func (s *Server) skip(w http.ResponseWriter, r *http.Request) {
	seq, ok := pathSeq(w, r)
	if !ok {
		return
	}
	a, ok := readAction(w, r, true)
	if !ok || !s.openDeadLetter(w, r, seq) {
		return
	}
	s.act(w, r, store.ActionSkip, itoa(seq), a)
}

func (s *Server) releaseKey(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	a, ok := readAction(w, r, true)
	if !ok {
		return
	}
	kv, err := s.store.Executor().KeyViewGet(r.Context(), store.KeyRef{Consumer: s.opt.Consumer, Key: key})
	if err != nil {
		s.serverError(w, r, fmt.Errorf("key %q: %w", key, err))
		return
	}
	if !kv.Blocked {
		// A key held behind a turn whose message may never come back is
		// released by ending that turn (seqbox.Consumer.ReleaseKey).
		_, err := s.store.Executor().RetryOnKey(r.Context(), store.KeyRef{Consumer: s.opt.Consumer, Key: key})
		if errors.Is(err, store.ErrNotFound) {
			writeProblem(w, r, Problem{Type: ProblemConflict, Status: http.StatusConflict, Field: "key",
				Detail: fmt.Sprintf("key %q is not blocked, and no message holds its turn", key)})
			return
		}
		if err != nil {
			s.serverError(w, r, fmt.Errorf("key %q: %w", key, err))
			return
		}
	}
	s.act(w, r, store.ActionRelease, key, a)
}

// act records an operator request for the server's own consumer (docs/design.md
// §9), waits for its result and answers with it: 200 with the results
// when it ran, 409 when the consumer refused it, 504 when nobody took it
// within RequestWait (the request is then cancelled).
func (s *Server) act(w http.ResponseWriter, r *http.Request, action, target string, a ActionRequest) {
	ctx := r.Context()
	ctl := s.store.Executor()
	seq, err := ctl.RequestInsert(ctx, store.OperatorRequest{Consumer: s.opt.Consumer, Action: action, Target: target,
		RequestedBy: a.By, Reason: a.Reason, RequestedAt: time.Now()})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	req, err := awaitRequest(ctx, ctl, seq, s.opt.RequestWait)
	label := string(req.State)
	if err != nil {
		label = "timeout"
	}
	s.metrics.adminActions.WithLabelValues(s.opt.Consumer, action, label).Inc()
	if err != nil {
		writeProblem(w, r, Problem{Type: ProblemUnavailable, Title: "Request not executed", Status: http.StatusGatewayTimeout,
			Detail: err.Error()})
		return
	}
	res := resultOf(req)
	if req.State == seqboxtype.RequestFailed {
		writeProblem(w, r, Problem{Type: ProblemRequestFailed, Title: "The consumer refused the request", Status: http.StatusConflict,
			Detail: fmt.Sprintf("request %d (%s %s): %s", seq, action, target, req.Error)})
		return
	}
	if err := res.NoteDeadLetter(ctx, ctl, s.opt.Consumer); err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// resultOf is the answer for request req. A result the API cannot read
// answers what could be read of it.
func resultOf(req store.OperatorRequest) ActionResult {
	a, _ := ops.ActedOf(req)
	return ActionResult{Acted: a, Decisions: a.Results}
}

// showRequest is GET /v1/admin/requests/{seq}: an operator request and
// its result, for a client whose wait timed out.
func (s *Server) showRequest(w http.ResponseWriter, r *http.Request) {
	seq, ok := pathNumber(w, r, "a request number")
	if !ok {
		return
	}
	req, err := s.store.Executor().RequestGet(r.Context(), seq)
	if err == nil && req.Consumer != s.opt.Consumer {
		err = store.ErrNotFound
	}
	if err != nil {
		s.serverError(w, r, fmt.Errorf("request %d: %w", seq, err))
		return
	}
	writeJSON(w, http.StatusOK, resultOf(req))
}

// awaitRequest waits for the request's result; the errors name the
// admin API's next step.
func awaitRequest(ctx context.Context, ctl store.Executor, seq int64, wait time.Duration) (store.OperatorRequest, error) {
	r, err := ops.AwaitRequest(ctx, ctl, seq, wait, 50*time.Millisecond)
	var running *ops.StillRunningError
	switch {
	case errors.Is(err, ops.ErrNotTaken):
		return r, fmt.Errorf("the consumer did not take request %d within %s; it is cancelled, nothing changed", seq, wait)
	case errors.As(err, &running):
		return r, fmt.Errorf("%w: GET /v1/admin/requests/%d", err, seq)
	}
	return r, err
}
