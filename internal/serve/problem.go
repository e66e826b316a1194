package serve

import (
	"encoding/json"
	"net/http"
)

// Problem is an RFC 9457 problem details body. Field names the envelope
// attribute (or the request member) that is wrong, when one is.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	Field    string `json:"field,omitempty"`
	// Index is the position of the offending event in a batch.
	Index *int `json:"index,omitempty"`
	// Errors lists every invalid event of a refused batch.
	Errors []EventError `json:"errors,omitempty"`
	// Source and ID name the identity a collision is about.
	Source string `json:"source,omitempty"`
	ID     string `json:"id,omitempty"`
}

// EventError is one invalid event of a batch.
type EventError struct {
	Index  int    `json:"index"`
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// Problem types, relative to the problem base URI.
const (
	problemBase          = "https://github.com/seqbox/seqbox/blob/main/docs/problems.md#"
	ProblemInvalidEvent  = problemBase + "invalid-event"
	ProblemTooLarge      = problemBase + "too-large"
	ProblemUnsupported   = problemBase + "unsupported-media-type"
	ProblemUnauthorized  = problemBase + "unauthorized"
	ProblemNotFound      = problemBase + "not-found"
	ProblemConflict      = problemBase + "conflict"
	ProblemCollision     = problemBase + "collision"
	ProblemBadRequest    = problemBase + "bad-request"
	ProblemUnavailable   = problemBase + "unavailable"
	ProblemRequestFailed = problemBase + "request-failed"
	ProblemMethod        = problemBase + "method-not-allowed"
	ProblemForbidden     = problemBase + "forbidden"
	ProblemEventFinal    = problemBase + "event-final"
	ProblemAgentWaits    = problemBase + "agent-waits"
)

// writeProblem writes p with its status and content type.
func writeProblem(w http.ResponseWriter, r *http.Request, p Problem) {
	if p.Instance == "" && r != nil {
		p.Instance = r.URL.Path
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
}

// writeJSON writes v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
