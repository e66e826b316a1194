// Package ops renders what an operator needs to see and decide behind
// `seqbox dlq` and `seqbox keys`: the dead letters, the stuck keys with the
// command that unsticks each one, and the decisions an operator action
// produced. Text tables are for people; the JSON forms (one object per
// line) are for scripts.
package ops

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/seqbox/seqbox/seqboxtype"
)

// WriteResults prints one JSON line per result, as replay does, so the
// output of an operator action reads like the replay it continues.
func WriteResults(w io.Writer, results []seqboxtype.Result) error {
	return writeJSONLines(w, results)
}

func newEncoder(w io.Writer) *json.Encoder { return NewJSONEncoder(w) }

// NewJSONEncoder encodes one JSON value per line for a terminal as well as
// a script: characters that would not show as themselves (bidi overrides,
// zero-width and other format characters, line separators) are written as
// \u escapes, which decode to the same strings.
func NewJSONEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(visibleJSON{w})
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
	tw *Tabbed
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: NewTabbed(w, 0, 0, 2)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			c = "-"
		}
		cells[i] = Visible(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// fields prints label: value pairs, aligned; empty values print as "-".
type fields struct {
	tw *Tabbed
}

func newFields(w io.Writer) *fields {
	return &fields{tw: NewTabbed(w, 0, 0, 1)}
}

func (f *fields) add(label, value string) {
	if value == "" {
		value = "-"
	}
	fmt.Fprintf(f.tw, "%s:\t%s\n", label, Visible(value))
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

// Visible makes text safe to print on a terminal for people: control,
// format (bidi overrides, zero-width characters) and other invisible or
// line-breaking characters, and invalid bytes, are shown as escapes
// (\u202e, \x1b, \xff), so what an operator reads is what is stored.
func Visible(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case hidden(r) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case hidden(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		case r == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// hidden reports whether r would not show as itself in a terminal cell:
// controls, format characters, separators other than the space, and
// unassigned or private code points.
func hidden(r rune) bool {
	return r != ' ' && (!unicode.IsGraphic(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Co))
}

func needsEscape(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if hidden(r) {
			return true
		}
	}
	return false
}

// shellWord quotes s for a POSIX shell when it needs quoting, so the
// advice printed next to a key can be pasted as is. Text with invisible
// characters uses bash's $'…' quoting with escapes, so it stays visible
// and still pastes to the same bytes.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/@%+=,") == "" {
		return s
	}
	if needsEscape(s) {
		return "$'" + strings.ReplaceAll(Visible(s), "'", `\'`) + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// visibleJSON escapes the hidden characters encoding/json leaves raw. It
// sees whole encoded values (json.Encoder writes each in one call), and
// such characters can only stand inside JSON strings.
type visibleJSON struct{ w io.Writer }

func (v visibleJSON) Write(p []byte) (int, error) {
	if !needsEscape(string(p)) {
		return v.w.Write(p)
	}
	var b strings.Builder
	for _, r := range string(p) {
		switch {
		case !hidden(r) || r < 0x80:
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	if _, err := io.WriteString(v.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}
