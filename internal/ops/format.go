package ops

import (
	"fmt"
	"io"
	"strings"

	"github.com/seqbox/seqbox/seqboxtype"
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

// Acted is an operator action's answer in JSON: what was asked, the
// request that ran it, and the results it produced (its own message's
// first).
type Acted struct {
	Action  string              `json:"action"`
	Target  string              `json:"target"`
	Request int64               `json:"request,omitempty"`
	Results []seqboxtype.Result `json:"results"`
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
	if len(a.Results) > 0 {
		switch a.Results[0].Outcome {
		case seqboxtype.DeadLettered, seqboxtype.Rejected, seqboxtype.Retry:
			verb = "ran, and failed again"
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
