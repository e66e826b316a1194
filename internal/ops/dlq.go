package ops

import (
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/seqbox/seqbox/store"
)

// DeadLetterLine is one DLQ row in `seqbox dlq list --json`.
type DeadLetterLine struct {
	Seq           int64   `json:"seq"`
	Source        string  `json:"source"`
	ID            string  `json:"id"`
	PartitionKey  string  `json:"partitionkey"`
	ObjectVersion *int64  `json:"objectversion"`
	Reason        string  `json:"reason"`
	Attempts      int     `json:"attempts"`
	DeadAt        *string `json:"dead_at"`
	Resolution    string  `json:"resolution"`
}

// DeadLetterDetail is one DLQ row in full, for `seqbox dlq show --json`.
// Envelope is the original bytes as a string; EnvelopeBase64 is the same
// bytes exactly, for an envelope that is not valid UTF-8.
type DeadLetterDetail struct {
	DeadLetterLine
	Consumer       string  `json:"consumer"`
	PayloadHash    string  `json:"payload_hash"`
	FirstError     string  `json:"first_error"`
	LastError      string  `json:"last_error"`
	ResolvedAt     *string `json:"resolved_at"`
	Envelope       string  `json:"envelope"`
	EnvelopeBase64 []byte  `json:"envelope_base64"`
	// Redrives and History: the redrives after which the message failed
	// again on this row, which kept its number.
	Redrives int      `json:"redrives"`
	History  []string `json:"history"`
}

func deadLetterLine(d store.DeadLetter) DeadLetterLine {
	return DeadLetterLine{Seq: d.Seq, Source: d.Source, ID: d.ID, PartitionKey: d.PartitionKey,
		ObjectVersion: d.ObjectVersion, Reason: d.Reason, Attempts: d.Attempts, DeadAt: jsonTime(d.DeadAt),
		Resolution: d.Resolution}
}

// WriteDeadLetters prints DLQ rows oldest first: a table, or JSON.
func WriteDeadLetters(w io.Writer, dls []store.DeadLetter, out Format) error {
	if out.Structured() {
		lines := make([]DeadLetterLine, len(dls))
		for i, d := range dls {
			lines[i] = deadLetterLine(d)
		}
		return WriteRows(w, out, lines)
	}
	t := newTable(w, "SEQ", "SOURCE", "ID", "PARTITIONKEY", "OBJECTVERSION", "REASON", "ATTEMPTS", "DEAD_AT", "RESOLUTION")
	for _, d := range dls {
		t.row(strconv.FormatInt(d.Seq, 10), d.Source, d.ID, d.PartitionKey, version(d.ObjectVersion), d.Reason,
			strconv.Itoa(d.Attempts), timeText(d.DeadAt), d.Resolution)
	}
	return t.flush()
}

// WriteDeadLetter prints one DLQ row in full. In text, the original
// envelope comes last, after an "envelope (N bytes):" line, followed by a
// newline, with what would not show as itself escaped (Visible); the JSON
// form carries its exact bytes in envelope_base64.
func WriteDeadLetter(w io.Writer, d store.DeadLetter, out Format) error {
	var resolved string
	if d.ResolvedAt != nil {
		resolved = timeText(*d.ResolvedAt)
	}
	if out.Structured() {
		det := DeadLetterDetail{DeadLetterLine: deadLetterLine(d), Consumer: d.Consumer, PayloadHash: d.PayloadHash,
			FirstError: d.FirstError, LastError: d.LastError, Envelope: string(d.Envelope), EnvelopeBase64: d.Envelope,
			Redrives: d.Redrives, History: d.History}
		if d.ResolvedAt != nil {
			det.ResolvedAt = jsonTime(*d.ResolvedAt)
		}
		return writeJSONLines(w, []DeadLetterDetail{det})
	}
	f := newFields(w)
	f.add("seq", strconv.FormatInt(d.Seq, 10))
	f.add("consumer", d.Consumer)
	f.add("source", d.Source)
	f.add("id", d.ID)
	f.add("partitionkey", d.PartitionKey)
	f.add("objectversion", version(d.ObjectVersion))
	f.add("payload_hash", d.PayloadHash)
	f.add("reason", d.Reason)
	f.add("attempts", strconv.Itoa(d.Attempts))
	f.add("first_error", d.FirstError)
	f.add("last_error", d.LastError)
	f.add("dead_at", timeText(d.DeadAt))
	f.add("resolution", d.Resolution)
	f.add("resolved_at", resolved)
	if d.Redrives > 0 {
		f.add("redrives", strconv.Itoa(d.Redrives))
	}
	if err := f.flush(); err != nil {
		return err
	}
	if len(d.History) > 0 {
		if _, err := io.WriteString(w, "history:\n"); err != nil {
			return err
		}
		for _, h := range d.History {
			if _, err := fmt.Fprintf(w, "  %s\n", Visible(h)); err != nil {
				return err
			}
		}
	}
	note := ""
	if !utf8.Valid(d.Envelope) {
		note = ", not valid UTF-8"
	}
	if _, err := fmt.Fprintf(w, "envelope (%d bytes%s):\n", len(d.Envelope), note); err != nil {
		return err
	}
	// For people: what would not show as itself is escaped (the bytes
	// are intact in the DLQ; --json carries them exactly).
	if _, err := io.WriteString(w, Visible(string(d.Envelope))); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
