package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// Format is how an operator command prints: Text for people (tables,
// fields, sentences), JSON for scripts (one JSON document: an array for a
// list, an object for one record or an action), JSONLines for streams
// (one JSON object per line).
type Format string

// The formats of --output.
const (
	Text      Format = "text"
	JSON      Format = "json"
	JSONLines Format = "jsonl"
)

// ParseFormat reads a --output value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case Text, JSON, JSONLines:
		return f, nil
	}
	return "", fmt.Errorf("--output %q: want text, json or jsonl", s)
}

// Structured reports whether f is one of the JSON forms.
func (f Format) Structured() bool { return f == JSON || f == JSONLines }

// WriteRows prints rows as one JSON array (JSON; [] for none) or one
// object per line (JSONLines).
func WriteRows[T any](w io.Writer, f Format, rows []T) error {
	if f == JSON {
		if rows == nil {
			rows = []T{}
		}
		return newEncoder(w).Encode(rows)
	}
	return writeJSONLines(w, rows)
}

// Acted is an operator action's result, the one JSON view of it: what
// `dlq redrive|skip` and `keys release` print with --output json, through
// --db and through --server, and what the admin API answers
// (serve.ActionResult, which adds only the decisions alias). It is the
// operator request that ran the action (ActedOf): who asked and why, who
// took it, and the results it produced, its own message's first.
type Acted struct {
	Request int64  `json:"request"`
	Action  string `json:"action"`
	Target  string `json:"target"`
	State   string `json:"state"`
	By      string `json:"by"`
	Reason  string `json:"reason"`
	TakenBy string `json:"taken_by"`
	Error   string `json:"error,omitempty"`
	// Results are the delivery results of the request, in order
	// (docs/design.md §2: a result, not a decision, which is only the
	// agent's answer).
	Results []seqboxtype.Result `json:"results"`
	// DeadLetter is the open DLQ row of a redriven message that failed
	// again (FailedAgain): the redrive ran, but the message is
	// dead-lettered once more, still as this seq (a dead letter keeps its
	// number across redrives). NoteDeadLetter fills it in.
	DeadLetter *int64 `json:"dead_letter,omitempty"`
}

// ActedOf is the result of operator request r, as far as r records it;
// the error names a result that cannot be read (Results then holds what
// could be).
func ActedOf(r store.OperatorRequest) (Acted, error) {
	a := Acted{Request: r.Seq, Action: r.Action, Target: r.Target, State: string(r.State), By: r.RequestedBy,
		Reason: r.Reason, TakenBy: r.TakenBy, Error: r.Error}
	var err error
	if len(r.Result) > 0 {
		if err = json.Unmarshal(r.Result, &a.Results); err != nil {
			err = fmt.Errorf("request %d: unreadable result: %w", r.Seq, err)
		}
	}
	if a.Results == nil {
		a.Results = []seqboxtype.Result{}
	}
	return a, err
}

// FailedAgain reports whether a is a redrive whose own message was
// dead-lettered again (or rejected again, which dead-letters it too) in
// the end: its last result, after the retries the redrive ran.
func (a Acted) FailedAgain() bool {
	own, ok := a.Own()
	return ok && a.Action == store.ActionRedrive && (own.Outcome == seqboxtype.DeadLettered || own.Outcome == seqboxtype.Rejected)
}

// Own is the last result of the action's own message (the first result's
// identity; the successors it let out come after it), and false when
// there are no results.
func (a Acted) Own() (seqboxtype.Result, bool) {
	if len(a.Results) == 0 {
		return seqboxtype.Result{}, false
	}
	own := a.Results[0]
	for _, r := range a.Results[1:] {
		if r.Source == own.Source && r.ID == own.ID && own.ID != "" {
			own = r
		}
	}
	return own, true
}

// NoteDeadLetter sets DeadLetter when a failed again: the newest open DLQ
// row of its message in consumer's DLQ (none found: nil).
func (a *Acted) NoteDeadLetter(ctx context.Context, ctl store.Executor, consumer string) error {
	if !a.FailedAgain() {
		return nil
	}
	letters, err := ctl.DeadLetterList(ctx, store.DeadLetterListParams{Consumer: consumer})
	if err != nil {
		return err
	}
	// The redriven row itself, when still open: it took the failure.
	if seq, err := strconv.ParseInt(a.Target, 10, 64); err == nil {
		for _, letter := range letters {
			if letter.Seq == seq {
				a.DeadLetter = &letter.Seq
				return nil
			}
		}
	}
	first, _ := a.Own()
	for _, letter := range letters {
		if letter.Source == first.Source && letter.ID == first.ID && (a.DeadLetter == nil || letter.Seq > *a.DeadLetter) {
			a.DeadLetter = &letter.Seq
		}
	}
	return nil
}

// WriteActed prints an operator action's results: a sentence (Text), one
// object (JSON), or one result per line as replay prints them
// (JSONLines).
func WriteActed(w io.Writer, f Format, a Acted) error {
	switch f {
	case JSON:
		if a.Results == nil {
			a.Results = []seqboxtype.Result{}
		}
		return newEncoder(w).Encode(a)
	case JSONLines:
		return WriteResults(w, a.Results)
	}
	_, err := fmt.Fprintln(w, ActionSentence(a))
	return err
}

// ActionSentence says in one line what an action did: "redrive of dead
// letter 1 done (request 3): crm/k2-v2 applied, then crm/k2-v3 applied".
func ActionSentence(a Acted) string {
	noun := "dead letter"
	if a.Action == "release" {
		noun = "key"
	}
	verb := "done"
	if own, ok := a.Own(); ok {
		switch own.Outcome {
		case seqboxtype.DeadLettered, seqboxtype.Rejected:
			verb = "ran, and failed again"
		case seqboxtype.Retry:
			// Not a failure: it waits (its call or its decision is in
			// flight elsewhere, another redrive has it), and comes back.
			verb = "ran; its message waits to be tried again"
		}
	}
	s := a.Action + " of " + noun + " " + Visible(a.Target) + " " + verb
	if a.Request > 0 {
		s += fmt.Sprintf(" (request %d)", a.Request)
	}
	if len(a.Results) == 0 {
		return s + ": nothing to apply"
	}
	parts := make([]string, len(a.Results))
	for i, res := range a.Results {
		p := Visible(res.Source) + "/" + Visible(res.ID) + " " + string(res.Outcome)
		if res.Reason != "" && res.Outcome != seqboxtype.Applied {
			p += " (" + Visible(res.Reason) + ")"
		}
		parts[i] = p
	}
	return s + ": " + strings.Join(parts, ", then ")
}
