package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
)

// Media types of the CloudEvents HTTP binding, and plain JSON (which
// POST /v1/events takes as one structured envelope).
const (
	mediaStructured = "application/cloudevents+json"
	mediaBatch      = "application/cloudevents-batch+json"
	mediaJSON       = "application/json"
)

// isBinary reports whether a request is in binary mode: it carries the
// ce-specversion or the ce-id header.
func isBinary(h http.Header) bool {
	return h.Get("Ce-Specversion") != "" || h.Get("Ce-Id") != ""
}

// Accepted is the answer of POST /v1/events once the request's events
// are durable: 202 when it queued any, 200 when every one was a duplicate
// of a copy accepted before (nothing queued).
type Accepted struct {
	// Status is "queued" when every event was queued, "duplicate" when
	// none was (each is a copy of one accepted before), and "partial" when
	// a batch holds both (each event says which, collisions too).
	Status string `json:"status"`
	// Accepted counts the events queued; Duplicates those a copy of which
	// was accepted before; Collisions those whose identity was accepted
	// before with another payload (not queued).
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
	Collisions int `json:"collisions"`
	// Events lists each event's identity and status, in request order.
	Events []QueuedEvent `json:"events"`
	// Note says what a retry of the same request does.
	Note string `json:"note"`
}

// QueuedEvent is one event of an answered request: queued, duplicate (a
// copy of it was accepted at FirstAcceptedAt; this one is not queued) or
// collision (its identity was accepted at FirstAcceptedAt with another
// payload, FirstPayloadHash; this one is not queued).
type QueuedEvent struct {
	Index            int     `json:"index"`
	Source           string  `json:"source"`
	ID               string  `json:"id"`
	Status           string  `json:"status"`
	PayloadHash      string  `json:"payload_hash"`
	FirstAcceptedAt  *string `json:"first_accepted_at,omitempty"`
	FirstPayloadHash string  `json:"first_payload_hash,omitempty"`
}

const idempotentNote = "queued durably; the consumer's inbox deduplicates by (source, id), so retrying this request is safe"

// The statuses of an ingested event.
const (
	statusQueued    = "queued"
	statusDuplicate = "duplicate"
	statusCollision = "collision"
	statusPartial   = "partial"
)

// ingest is POST /v1/events.
func (s *Server) ingest(w http.ResponseWriter, r *http.Request) {
	mode, raws, perr := s.readEvents(w, r)
	if perr != nil {
		s.metrics.ingestRequests.WithLabelValues(mode, strconv.Itoa(perr.Status)).Inc()
		writeProblem(w, r, *perr)
		return
	}
	out := Accepted{Events: make([]QueuedEvent, len(raws)), Note: idempotentNote}
	evs := make([]seqboxtype.Event, len(raws))
	var bad []EventError
	for i, raw := range raws {
		if len(raw) > seqboxtype.MaxEventSize {
			p := Problem{Type: ProblemTooLarge, Title: "Event too large", Status: http.StatusRequestEntityTooLarge,
				Detail: fmt.Sprintf("event %d is %d bytes, larger than the %d-byte limit of one event", i, len(raw), seqboxtype.MaxEventSize),
				Field:  "envelope"}
			if mode == "batch" {
				p.Index = &i
			}
			s.metrics.ingestRequests.WithLabelValues(mode, "413").Inc()
			writeProblem(w, r, p)
			return
		}
		ev, canon, err := ingestEvent(raw)
		if err != nil {
			field, detail := "envelope", err.Error()
			var ie *seqboxtype.InvalidEventError
			if errors.As(err, &ie) {
				field, detail = ie.Field, ie.Reason
			}
			bad = append(bad, EventError{Index: i, Field: field, Detail: detail})
			continue
		}
		out.Events[i] = QueuedEvent{Index: i, Source: ev.Source, ID: ev.ID, PayloadHash: ev.Hash}
		ev.Raw = canon // what is queued: the canonical envelope
		evs[i] = ev
	}
	if len(bad) > 0 {
		s.metrics.ingestRequests.WithLabelValues(mode, "400").Inc()
		s.metrics.ingestRejected.WithLabelValues(s.opt.Consumer, mode).Add(float64(len(bad)))
		s.countContractFailures(bad)
		p := Problem{Type: ProblemInvalidEvent, Title: "Invalid event", Status: http.StatusBadRequest,
			Field: bad[0].Field, Detail: bad[0].Field + ": " + bad[0].Detail}
		if mode == "batch" {
			p.Index = &bad[0].Index
			p.Errors = bad
			p.Detail = fmt.Sprintf("%d of %d events are invalid, so none was queued (a batch is all or nothing); first: event %d: %s: %s",
				len(bad), len(raws), bad[0].Index, bad[0].Field, bad[0].Detail)
		}
		writeProblem(w, r, p)
		return
	}
	accepted, err := s.publisher.Publish(r.Context(), evs)
	if err != nil {
		if r.Context().Err() == nil {
			s.ingestFailed.Store(&ingestFailure{err: err, at: time.Now()})
		}
		s.metrics.ingestRequests.WithLabelValues(mode, "503").Inc()
		s.opt.Logger.Error("seqbox serve: publish failed", "err", err)
		writeProblem(w, r, Problem{Type: ProblemUnavailable, Status: http.StatusServiceUnavailable,
			Detail: "the events could not be queued durably; nothing was queued, retry the request: " + err.Error()})
		return
	}
	if f := s.ingestFailed.Load(); f != nil {
		s.ingestFailed.CompareAndSwap(f, nil)
	}
	for i, a := range accepted {
		e := &out.Events[i]
		switch {
		case a.New:
			e.Status = statusQueued
			out.Accepted++
			continue
		case a.First.PayloadHash == e.PayloadHash:
			e.Status = statusDuplicate
			out.Duplicates++
		default:
			e.Status, e.FirstPayloadHash = statusCollision, a.First.PayloadHash
			out.Collisions++
		}
		e.FirstAcceptedAt = stamp(a.First.At)
	}
	s.metrics.ingestEvents.WithLabelValues(s.opt.Consumer, mode).Add(float64(out.Accepted))
	code := http.StatusAccepted
	switch {
	case out.Accepted == len(raws):
		out.Status = statusQueued
	case out.Accepted > 0:
		out.Status = statusPartial
	case out.Collisions > 0 && mode != "batch":
		e := out.Events[0]
		s.metrics.ingestRequests.WithLabelValues(mode, "409").Inc()
		writeProblem(w, r, Problem{Type: ProblemCollision, Title: "Collision", Status: http.StatusConflict, Field: "id",
			Detail: fmt.Sprintf("source=%q id=%q was accepted at %s with another payload (%s); this copy (%s) is a collision and was not queued: "+
				"an identity names one payload, so give a new event a new id", e.Source, e.ID, *e.FirstAcceptedAt, e.FirstPayloadHash, e.PayloadHash),
			Source: e.Source, ID: e.ID})
		return
	case out.Collisions > 0:
		out.Status, code = statusPartial, http.StatusConflict
	default:
		out.Status, code = statusDuplicate, http.StatusOK
	}
	s.metrics.ingestRequests.WithLabelValues(mode, strconv.Itoa(code)).Inc()
	writeJSON(w, code, out)
}

// readEvents reads the request's events in the mode its headers say. The
// mode is "structured", "binary" or "batch".
func (s *Server) readEvents(w http.ResponseWriter, r *http.Request) (string, [][]byte, *Problem) {
	mode := "structured"
	ct := r.Header.Get("Content-Type")
	mt := ""
	if ct != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(ct); err != nil {
			return mode, nil, &Problem{Type: ProblemUnsupported, Status: http.StatusUnsupportedMediaType,
				Detail: fmt.Sprintf("Content-Type %q: %v", ct, err), Field: "Content-Type"}
		}
	}
	// Which Content-Type is accepted is a security rule as much as a
	// format rule: a cross-site page can make a browser POST here without
	// asking (no CORS preflight) only with no Content-Type or with
	// text/plain, application/x-www-form-urlencoded or multipart/form-data,
	// and never with a ce-* header. So a structured envelope must say so
	// (application/cloudevents+json, or application/json), and a body
	// of any other type, or none, is taken only in binary mode, whose ce-*
	// headers a browser sends only after a preflight this server does not
	// answer. Without that rule, an ingest token being optional, any web
	// page a user of this machine opens could inject events.
	switch {
	case mt == mediaBatch:
		mode = "batch"
	case mt == mediaStructured:
	case isBinary(r.Header):
		mode = "binary"
	case mt == mediaJSON:
		// A whole envelope sent as plain JSON: structured.
	case ct == "":
		return mode, nil, &Problem{Type: ProblemUnsupported, Status: http.StatusUnsupportedMediaType, Field: "Content-Type",
			Detail: fmt.Sprintf("the Content-Type header is missing: send %s (one event), %s (a batch) or %s (one event), or binary mode (ce-* headers, the body is data)",
				mediaStructured, mediaBatch, mediaJSON)}
	default:
		return mode, nil, &Problem{Type: ProblemUnsupported, Status: http.StatusUnsupportedMediaType, Field: "Content-Type",
			Detail: fmt.Sprintf("the Content-Type header is %s: send %s (one event), %s (a batch) or %s (one event), or binary mode (ce-* headers, the body is data)",
				mt, mediaStructured, mediaBatch, mediaJSON)}
	}
	if p := encodingProblem(r.Header); p != nil {
		return mode, nil, p
	}
	if r.ContentLength > s.opt.MaxBody {
		// Declared too large: refused before a byte of it is read.
		return mode, nil, &Problem{Type: ProblemTooLarge, Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
			Field: "body", Detail: fmt.Sprintf("Content-Length %d is larger than the %d-byte limit (--max-body); nothing was queued", r.ContentLength, s.opt.MaxBody)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opt.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return mode, nil, &Problem{Type: ProblemTooLarge, Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
				Field: "body", Detail: fmt.Sprintf("the body is larger than the %d-byte limit (--max-body); nothing was queued", s.opt.MaxBody)}
		}
		return mode, nil, &Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: "body", Detail: "reading the body: " + err.Error()}
	}
	switch mode {
	case "binary":
		env, err := BinaryEnvelope(r.Header, body)
		if err != nil {
			return mode, nil, invalidProblem(err)
		}
		return mode, [][]byte{env}, nil
	case "batch":
		raws, p := splitBatch(body, s.opt.MaxBatch)
		return mode, raws, p
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return mode, nil, &Problem{Type: ProblemInvalidEvent, Title: "Invalid event", Status: http.StatusBadRequest, Field: "envelope",
			Detail: "envelope: the body is empty: send one CloudEvent as JSON"}
	}
	return mode, [][]byte{body}, nil
}

// countContractFailures counts the events ingest refused as invalid in
// the consumer's own metrics, as the pipeline counts the envelopes it
// rejects: seqbox_contract_failures_total, and seqbox_unidentified_total
// for those whose identity could not be read.
func (s *Server) countContractFailures(bad []EventError) {
	m := s.consumerMetrics
	if m == nil {
		return
	}
	m.ContractFailure.WithLabelValues(s.opt.Consumer).Add(float64(len(bad)))
	for _, e := range bad {
		switch e.Field {
		case "id", "source", "envelope":
			m.Unidentified.WithLabelValues(s.opt.Consumer).Inc()
		}
	}
}

// encodingProblem refuses a body with a Content-Encoding other than
// identity: seqbox reads bodies as sent, so a compressed one would be
// taken for a malformed envelope or, in binary mode, kept as the event's
// data.
func encodingProblem(h http.Header) *Problem {
	values := h.Values("Content-Encoding")
	for _, v := range values {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return &Problem{Type: ProblemUnsupported, Status: http.StatusUnsupportedMediaType, Field: "Content-Encoding",
					Detail: fmt.Sprintf("Content-Encoding %s: seqbox takes uncompressed bodies only; send the body as it is, without Content-Encoding; nothing was queued", strings.Join(values, ", "))}
			}
		}
	}
	return nil
}

// splitBatch splits a JSON array of envelopes into their exact bytes.
func splitBatch(body []byte, maxBatch int) ([][]byte, *Problem) {
	bad := func(detail string) *Problem {
		return &Problem{Type: ProblemInvalidEvent, Title: "Invalid batch", Status: http.StatusBadRequest, Field: "batch", Detail: detail}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('[') {
		return nil, bad("a batch is a JSON array of CloudEvents")
	}
	var raws [][]byte
	for dec.More() {
		if len(raws) == maxBatch {
			return nil, &Problem{Type: ProblemTooLarge, Title: "Batch too large", Status: http.StatusRequestEntityTooLarge, Field: "batch",
				Detail: fmt.Sprintf("more than %d events in one batch (--max-batch); nothing was queued", maxBatch)}
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, bad(fmt.Sprintf("event %d: not valid JSON: %v", len(raws), err))
		}
		raws = append(raws, raw)
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad("the batch array is not closed: " + err.Error())
	}
	if len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		return nil, bad("trailing data after the batch array")
	}
	if len(raws) == 0 {
		return nil, bad("the batch is empty")
	}
	return raws, nil
}

func invalidProblem(err error) *Problem {
	var ie *seqboxtype.InvalidEventError
	field, detail := "envelope", err.Error()
	if errors.As(err, &ie) {
		field, detail = ie.Field, ie.Reason
	}
	return &Problem{Type: ProblemInvalidEvent, Title: "Invalid event", Status: http.StatusBadRequest, Field: field, Detail: field + ": " + detail}
}
