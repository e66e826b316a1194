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
func WriteDeadLetters(w io.Writer, letters []store.DeadLetter) error {
	t := newTable(w, "SEQ", "SOURCE", "ID", "PARTITIONKEY", "OBJECTVERSION", "REASON", "ATTEMPTS", "DEAD_AT", "RESOLUTION")
	for _, letter := range letters {
		t.row(strconv.FormatInt(letter.Seq, 10), letter.Source, letter.ID, letter.PartitionKey, version(letter.ObjectVersion), letter.Reason,
			strconv.Itoa(letter.Attempts), timeText(letter.DeadAt), letter.Resolution)
	}
	return t.flush()
}

// WriteDeadLetter prints one DLQ row in full, as text: the original
// envelope comes last, after an "envelope (N bytes):" line, followed by a
// newline, with what would not show as itself escaped (Visible). Its JSON
// is the admin API's view, which carries the exact bytes.
func WriteDeadLetter(w io.Writer, letter store.DeadLetter) error {
	var resolved string
	if letter.ResolvedAt != nil {
		resolved = timeText(*letter.ResolvedAt)
	}
	f := newFields(w)
	f.add("seq", strconv.FormatInt(letter.Seq, 10))
	f.add("consumer", letter.Consumer)
	f.add("source", letter.Source)
	f.add("id", letter.ID)
	f.add("partitionkey", letter.PartitionKey)
	f.add("objectversion", version(letter.ObjectVersion))
	f.add("payload_hash", letter.PayloadHash)
	f.add("reason", letter.Reason)
	f.add("attempts", strconv.Itoa(letter.Attempts))
	f.add("first_error", letter.FirstError)
	f.add("last_error", letter.LastError)
	f.add("dead_at", timeText(letter.DeadAt))
	f.add("resolution", letter.Resolution)
	f.add("resolved_at", resolved)
	if letter.Redrives > 0 {
		f.add("redrives", strconv.Itoa(letter.Redrives))
	}
	if err := f.flush(); err != nil {
		return err
	}
	if len(letter.History) > 0 {
		if _, err := io.WriteString(w, "history:\n"); err != nil {
			return err
		}
		for _, h := range letter.History {
			if _, err := fmt.Fprintf(w, "  %s\n", Visible(h)); err != nil {
				return err
			}
		}
	}
	note := ""
	if !utf8.Valid(letter.Envelope) {
		note = ", not valid UTF-8"
	}
	if _, err := fmt.Fprintf(w, "envelope (%d bytes%s):\n", len(letter.Envelope), note); err != nil {
		return err
	}
	// For people: what would not show as itself is escaped (the bytes
	// are intact in the DLQ; --output json carries them exactly).
	if _, err := io.WriteString(w, Visible(string(letter.Envelope))); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
