package ops

import (
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/seqbox/seqbox/store"
)

// WriteDeadLetters prints DLQ rows oldest first, as a table. Their JSON
// is the admin API's view (serve.DeadLetterViewOf).
func WriteDeadLetters(w io.Writer, dls []store.DeadLetter) error {
	t := newTable(w, "SEQ", "SOURCE", "ID", "PARTITIONKEY", "OBJECTVERSION", "REASON", "ATTEMPTS", "DEAD_AT", "RESOLUTION")
	for _, d := range dls {
		t.row(strconv.FormatInt(d.Seq, 10), d.Source, d.ID, d.PartitionKey, version(d.ObjectVersion), d.Reason,
			strconv.Itoa(d.Attempts), timeText(d.DeadAt), d.Resolution)
	}
	return t.flush()
}

// WriteDeadLetter prints one DLQ row in full, as text: the original
// envelope comes last, after an "envelope (N bytes):" line, followed by a
// newline, with what would not show as itself escaped (Visible). Its JSON
// is the admin API's view, which carries the exact bytes.
func WriteDeadLetter(w io.Writer, d store.DeadLetter) error {
	var resolved string
	if d.ResolvedAt != nil {
		resolved = timeText(*d.ResolvedAt)
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
	// are intact in the DLQ; --output json carries them exactly).
	if _, err := io.WriteString(w, Visible(string(d.Envelope))); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
