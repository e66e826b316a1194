// Package ops renders what an operator needs to see and decide behind
// `seqbox dlq` and `seqbox keys`: the dead letters, the stuck keys with the
// command that unsticks each one, and the decisions an operator action
// produced. Text tables are for people; the JSON forms (one object per
// line) are for scripts.
package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seqbox/seqbox"
)

// DecisionLine is one decision in the format `seqbox replay` prints.
type DecisionLine struct {
	Source        string         `json:"source"`
	ID            string         `json:"id"`
	PartitionKey  string         `json:"partitionkey"`
	ObjectVersion *int64         `json:"objectversion"`
	Outcome       seqbox.Outcome `json:"outcome"`
}

// WriteDecisions prints one JSON line per decision, as replay does, so the
// output of an operator action reads like the replay it continues.
func WriteDecisions(w io.Writer, ds []seqbox.Decision) error {
	enc := newEncoder(w)
	for _, d := range ds {
		if err := enc.Encode(DecisionLine{d.Source, d.ID, d.PartitionKey, d.ObjectVersion, d.Outcome}); err != nil {
			return err
		}
	}
	return nil
}

func newEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// writeJSONLines prints each value on its own line.
func writeJSONLines[T any](w io.Writer, vs []T) error {
	enc := newEncoder(w)
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
}

// table is a tab-aligned text table; empty cells print as "-".
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			c = "-"
		}
		// A cell must stay on its line and in its column.
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// fields prints label: value pairs, aligned; empty values print as "-".
type fields struct {
	tw *tabwriter.Writer
}

func newFields(w io.Writer) *fields {
	return &fields{tw: tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)}
}

func (f *fields) add(label, value string) {
	if value == "" {
		value = "-"
	}
	fmt.Fprintf(f.tw, "%s:\t%s\n", label, value)
}

func (f *fields) flush() error { return f.tw.Flush() }

func version(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10)
}

// timeText is a time for people: UTC, to the second.
func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// jsonTime is a time for scripts: UTC, full precision; null when zero.
func jsonTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

// shellWord quotes s for a POSIX shell when it needs quoting, so the
// advice printed next to a key can be pasted as is.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Redrive redrives DLQ message seq through c and, as replay does, sends a
// transient failure back at once until the message applies or is
// dead-lettered again. It returns every decision in order.
func Redrive(ctx context.Context, c *seqbox.Consumer, seq int64, maxAttempts int) ([]seqbox.Decision, error) {
	var out []seqbox.Decision
	for i := 0; ; i++ {
		ds, err := c.Redrive(ctx, seq)
		if err != nil {
			return out, err
		}
		out = append(out, ds...)
		if len(ds) == 0 || ds[0].Outcome != seqbox.Retry || i >= maxAttempts {
			return out, nil
		}
	}
}
