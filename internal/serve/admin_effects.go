package serve

// The effects ledger in the admin API: the gateway consumer's external
// calls (its agent calls), and settling an uncertain one by hand, as
// `seqbox effects list|resolve` does on the database.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/ops"
)

// EffectsView is GET /v1/admin/effects: the consumer's ledger rows,
// oldest change first.
type EffectsView struct {
	Consumer string           `json:"consumer"`
	Effects  []effects.Effect `json:"effects"`
	// More says that more rows matched than ?limit let through: the
	// newer ones were left out.
	More bool `json:"more"`
}

// maxEffectsPage bounds ?limit of GET /v1/admin/effects.
const maxEffectsPage = 10000

// EffectResolved is a call settled by hand, the one JSON view of it: the
// answer of POST /v1/admin/effects/{key}/resolve and what `seqbox effects
// resolve --output json` prints. It is the resolution, under the call's
// idempotency key.
type EffectResolved struct {
	IdempotencyKey string `json:"idempotency_key"`
	ops.Resolution
}

// effectsRoutes are the ledger's admin routes (behind the admin token).
func (s *Server) effectsRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/admin/effects", s.listEffects)
	mux.HandleFunc("POST /v1/admin/effects/{key}/resolve", s.resolveEffect)
	return problemErrors(mux)
}

// listEffects is GET /v1/admin/effects?action=&state=&limit=.
func (s *Server) listEffects(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, bad := queryLimit(q, 100, maxEffectsPage)
	if bad != "" {
		badQuery(w, r, "limit", bad)
		return
	}
	state := effects.State(q.Get("state"))
	switch state {
	case "", effects.Pending, effects.Succeeded, effects.Failed, effects.Uncertain:
	default:
		writeProblem(w, r, Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: "state",
			Detail: fmt.Sprintf("state %q is not one of pending, succeeded, failed, uncertain", state)})
		return
	}
	// One more than asked says whether any were left out.
	rows, err := s.ledger.List(r.Context(), effects.Filter{Consumer: s.opt.Consumer, Action: q.Get("action"), State: state, Limit: limit + 1})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	view := EffectsView{Consumer: s.opt.Consumer, Effects: rows, More: len(rows) > limit}
	if view.More {
		view.Effects = rows[:limit]
	}
	if view.Effects == nil {
		view.Effects = []effects.Effect{}
	}
	writeJSON(w, http.StatusOK, view)
}

// resolveEffect is POST /v1/admin/effects/{key}/resolve with a body of
// {"state", "ref", "by", "reason"}.
func (s *Server) resolveEffect(w http.ResponseWriter, r *http.Request) {
	var res ops.Resolution
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxActionBody))
	if err != nil {
		writeProblem(w, r, Problem{Type: ProblemTooLarge, Status: http.StatusRequestEntityTooLarge, Field: "body",
			Detail: fmt.Sprintf("a resolution's body is at most %d bytes", maxActionBody)})
		return
	}
	if name := repeatedMember(body); name != "" {
		writeProblem(w, r, repeatedProblem(name))
		return
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		writeProblem(w, r, Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: "body",
			Detail: err.Error() + ` (want {"state": "succeeded" or "failed", "ref": "...", "by": "...", "reason": "..."})`})
		return
	}
	key := r.PathValue("key")
	if err := ops.ResolveEffect(r.Context(), s.ledger, s.opt.Consumer, key, res); err != nil {
		var bad *ops.BadResolutionError
		if errors.As(err, &bad) {
			writeProblem(w, r, Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Detail: err.Error()})
			return
		}
		if errors.Is(err, effects.ErrBeingDecided) {
			// Its decider runs now and reconciles the call itself: a
			// refusal of the moment, not a server error.
			w.Header().Set("Retry-After", "1")
			writeProblem(w, r, Problem{Type: ProblemConflict, Status: http.StatusConflict, Detail: err.Error()})
			return
		}
		s.serverError(w, r, err)
		return
	}
	s.opt.Logger.Info("seqbox serve: external call resolved by hand", "consumer", s.opt.Consumer, "idempotency_key", key,
		"state", res.State, "by", res.By, "reason", res.Reason)
	writeJSON(w, http.StatusOK, EffectResolved{IdempotencyKey: key, Resolution: res})
}
