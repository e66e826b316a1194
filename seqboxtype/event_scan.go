package seqboxtype

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// This file is the strict envelope scanner: one pass over the bytes that
// checks the JSON grammar (RFC 8259) and refuses everything that would give
// the same envelope more than one meaning (docs/design.md §3):
//
//   - bytes that are not valid UTF-8, anywhere (encoding/json would turn
//     them into U+FFFD, so ids differing only in such bytes would merge);
//   - a \u escape of a lone surrogate (a high one not followed by a low
//     one, or a low one alone), in a member name or a value, at any depth;
//   - a member name repeated in the same object, at any depth, comparing
//     names after unescaping ("id" and "\u0069d" are the same name);
//   - a number outside the range of an IEEE-754 double (1e400), which
//     RFC 8785 cannot represent, or one RFC 8785 can only round
//     (9007199254740993, 1e-400): the hash would hold another number.
//
// It records where each top-level member sits in the input, so the
// attributes are read and the hashed document is built without decoding
// the envelope again.

// maxNesting bounds how deep arrays and objects may nest (the envelope
// object is level 1). It is the limit of encoding/json and of jcs.
const maxNesting = 10000

// envMember is one member of the envelope object.
type envMember struct {
	name   []byte // unescaped member name
	nameAt int    // offset of the name's opening quote
	valAt  int    // offset of the value's first byte
	valEnd int    // offset just past the value
}

// kind is the value's first byte: '"', '{', '[', 't', 'f', 'n', or '-' or a
// digit for a number.
func (m *envMember) kind(raw []byte) byte { return raw[m.valAt] }

// pathSeg is one step of the JSON path to the value being scanned.
type pathSeg struct {
	name  []byte // member name; nil in an array
	index int    // element index in an array
	array bool
}

type envScanner struct {
	b     []byte
	i     int
	path  []pathSeg
	names [][]byte // names of the members of the objects being scanned
	top   []envMember
	// synAt is where a grammar error was found (errSyntax).
	synAt int
}

// errSyntax is returned by the scanner for input that is not JSON at all;
// scanEnvelope turns it into an *InvalidEventError.
var errSyntax = errors.New("syntax error")

// scanEnvelope checks raw strictly and returns the envelope's members in
// document order. Every error is an *InvalidEventError with a Field.
func scanEnvelope(raw []byte) ([]envMember, error) {
	return (&envScratch{}).scan(raw)
}

// envScratch is a scan's working memory: the path, the names of the
// objects being scanned, and the envelope's members. ParseEvent takes one
// from scratchPool and gives it back once it has read the members, so a
// parse does not allocate them for every message (they were 17% of the
// bytes BenchmarkRunBatch/sqlite allocated).
type envScratch struct {
	path  []pathSeg
	names [][]byte
	top   []envMember
}

var scratchPool = sync.Pool{New: func() any {
	return &envScratch{path: make([]pathSeg, 0, 8), names: make([][]byte, 0, 32), top: make([]envMember, 0, 16)}
}}

// maxPooledScratch bounds what goes back to the pool: the working memory
// of a deeply nested envelope is left to the collector.
const maxPooledScratch = 1024

// scan is scanEnvelope in sc's memory. The members it returns are valid
// until sc is released.
func (sc *envScratch) scan(raw []byte) ([]envMember, error) {
	s := envScanner{b: raw, top: sc.top[:0], path: sc.path[:0], names: sc.names[:0]}
	err := s.envelope()
	sc.path, sc.names, sc.top = s.path, s.names, s.top
	if err == errSyntax {
		return nil, syntaxError(raw, s.synAt)
	}
	if err != nil {
		return nil, err
	}
	return s.top, nil
}

// release gives sc back to the pool, holding no reference to the input.
func (sc *envScratch) release() {
	if cap(sc.path) > maxPooledScratch || cap(sc.names) > maxPooledScratch || cap(sc.top) > maxPooledScratch {
		return
	}
	clear(sc.path[:cap(sc.path)])
	clear(sc.names[:cap(sc.names)])
	clear(sc.top[:cap(sc.top)])
	scratchPool.Put(sc)
}

func (s *envScanner) envelope() error {
	s.skipSpace()
	if s.i == len(s.b) {
		return s.syntax()
	}
	if c := s.b[s.i]; c != '{' {
		what := valueKind(c)
		if what == "" {
			return s.syntax()
		}
		if err := s.value(0); err == errSyntax {
			return err
		}
		return invalid("envelope", "not a JSON object but %s", what)
	}
	if err := s.object(1); err != nil {
		return err
	}
	s.skipSpace()
	if s.i < len(s.b) {
		return invalid("envelope", "trailing data after the JSON object at byte %d", s.i)
	}
	return nil
}

// valueKind names the JSON value that starts with c, "" when none does.
func valueKind(c byte) string {
	switch {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || '0' <= c && c <= '9':
		return "a number"
	}
	return ""
}

func (s *envScanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *envScanner) syntax() error {
	s.synAt = s.i
	return errSyntax
}

// duplicateScanLimit is how many member names an object may have before
// duplicates are looked up in a map instead of by comparing with each.
const duplicateScanLimit = 32

// object scans the object at s.i ('{'), nested at the given depth.
func (s *envScanner) object(depth int) error {
	if depth > maxNesting {
		return invalid(s.topField(), "nested deeper than %d arrays and objects", maxNesting)
	}
	s.i++
	namesAt := len(s.names)
	var seen map[string]struct{}
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		if s.i == len(s.b) || s.b[s.i] != '"' {
			return s.syntax()
		}
		nameAt := s.i
		name, err := s.name()
		if err != nil {
			return err
		}
		dup := false
		if seen != nil {
			_, dup = seen[string(name)]
			seen[string(name)] = struct{}{}
		} else {
			for _, n := range s.names[namesAt:] {
				if bytes.Equal(n, name) {
					dup = true
					break
				}
			}
			if len(s.names)-namesAt >= duplicateScanLimit {
				seen = make(map[string]struct{}, 2*duplicateScanLimit)
				for _, n := range s.names[namesAt:] {
					seen[string(n)] = struct{}{}
				}
				seen[string(name)] = struct{}{}
			}
		}
		s.names = append(s.names, name)
		s.path = append(s.path, pathSeg{name: name})
		if dup {
			return invalid(s.field(), "duplicate member name %s (at byte %d)", quoteTrunc(name), nameAt)
		}
		s.skipSpace()
		if s.i == len(s.b) || s.b[s.i] != ':' {
			return s.syntax()
		}
		s.i++
		s.skipSpace()
		valAt := s.i
		if err := s.value(depth); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		if depth == 1 {
			s.top = append(s.top, envMember{name: name, nameAt: nameAt, valAt: valAt, valEnd: s.i})
		}
		done, err := s.separator('}')
		if err != nil || done {
			s.names = s.names[:namesAt]
			return err
		}
	}
}

// separator consumes what follows a member or an element: a ',' (and
// the space after it), or closing, which ends the container (done).
func (s *envScanner) separator(closing byte) (done bool, err error) {
	s.skipSpace()
	if s.i == len(s.b) {
		return false, s.syntax()
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		s.skipSpace()
		return false, nil
	case closing:
		s.i++
		return true, nil
	}
	return false, s.syntax()
}

// array scans the array at s.i ('['), nested at the given depth.
func (s *envScanner) array(depth int) error {
	if depth > maxNesting {
		return invalid(s.topField(), "nested deeper than %d arrays and objects", maxNesting)
	}
	s.i++
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	s.path = append(s.path, pathSeg{array: true})
	for n := 0; ; n++ {
		s.path[len(s.path)-1].index = n
		if err := s.value(depth); err != nil {
			return err
		}
		done, err := s.separator(']')
		if err != nil {
			return err
		}
		if done {
			s.path = s.path[:len(s.path)-1]
			return nil
		}
	}
}

// value scans the value at s.i, inside a container at the given depth.
func (s *envScanner) value(depth int) error {
	if s.i == len(s.b) {
		return s.syntax()
	}
	switch c := s.b[s.i]; c {
	case '{':
		return s.object(depth + 1)
	case '[':
		return s.array(depth + 1)
	case '"':
		_, err := s.str(false)
		return err
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return s.number()
		}
		return s.syntax()
	}
}

func (s *envScanner) literal(word string) error {
	for k := 0; k < len(word); k++ {
		if s.i == len(s.b) || s.b[s.i] != word[k] {
			return s.syntax()
		}
		s.i++
	}
	return nil
}

// number scans an RFC 8259 number and refuses one the payload hash cannot
// hold exactly (hashedNumber): one beyond an IEEE-754 double's range
// (1e400), which RFC 8785 has no text for, and one whose value differs
// from the decimal RFC 8785 writes for it (9007199254740993, written
// 9007199254740992), which would share its hash with other numbers. The
// error names the number's JSON path (data.items[2]).
func (s *envScanner) number() error {
	start := s.i
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i == len(s.b) {
		return s.syntax()
	}
	intAt := s.i
	switch c := s.b[s.i]; {
	case c == '0':
		s.i++
	case '1' <= c && c <= '9':
		s.digits()
	default:
		return s.syntax()
	}
	intDigits := s.i - intAt
	frac := false
	if s.i < len(s.b) && s.b[s.i] == '.' {
		frac = true
		s.i++
		if s.digits() == 0 {
			return s.syntax()
		}
	}
	exp := false
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		exp = true
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.syntax()
		}
	}
	lit := s.b[start:s.i]
	if !exp && !frac && intDigits <= maxExactDigits {
		return nil // the common case: exact, spared the conversion
	}
	canon, ok, outOfRange := hashedNumber(lit)
	switch {
	case outOfRange:
		return invalid(s.field(), "number %s is outside the range of an IEEE-754 double (RFC 8785 cannot represent it)", truncate(string(lit)))
	case !ok && !s.atObjectVersion():
		return invalid(s.field(), "number %s is not exactly a value the payload hash keeps: RFC 8785 reads it as the double written %s, "+
			"so different numbers would share one hash; send it as a string, or as %s if that is what it means", truncate(string(lit)), canon, canon)
	}
	return nil
}

// atObjectVersion reports whether the value being scanned is the
// envelope's objectversion, which ParseEvent reads exactly as an integer
// and judges with its own message (envelope.objectVersion).
func (s *envScanner) atObjectVersion() bool {
	return len(s.path) == 1 && string(s.path[0].name) == "objectversion"
}

func (s *envScanner) digits() int {
	n := 0
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// name scans a member name and returns it unescaped: a sub-slice of the
// input when it has no escapes.
func (s *envScanner) name() ([]byte, error) {
	start := s.i + 1
	escaped, err := s.str(true)
	if err != nil {
		return nil, err
	}
	if !escaped {
		return s.b[start : s.i-1 : s.i-1], nil
	}
	return unquote(s.b[start:s.i-1], nil), nil
}

// str scans the string at s.i ('"') and reports whether it has escapes.
// inName says whether it is a member name, for the field an error names.
func (s *envScanner) str(inName bool) (escaped bool, err error) {
	s.i++
	for {
		// The common case: printable ASCII other than '"' and '\'.
		for s.i < len(s.b) {
			c := s.b[s.i]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			s.i++
		}
		if s.i == len(s.b) {
			return escaped, s.syntax()
		}
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return escaped, nil
		case c < 0x20:
			return escaped, s.syntax()
		case c == '\\':
			escaped = true
			if err := s.escape(inName); err != nil {
				return escaped, err
			}
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size == 1 {
				return escaped, s.stringError(inName, "invalid UTF-8 at byte %d", s.i)
			}
			s.i += size
		}
	}
}

// escape scans the escape sequence at s.i ('\').
func (s *envScanner) escape(inName bool) error {
	at := s.i
	if s.i+1 == len(s.b) {
		s.i++
		return s.syntax()
	}
	switch s.b[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return nil
	case 'u':
	default:
		s.i++
		return s.syntax()
	}
	r, ok := hex4(s.b[s.i+2:])
	if !ok {
		s.i += 2
		return s.syntax()
	}
	s.i += 6
	switch {
	case r < 0xD800 || r > 0xDFFF:
		return nil
	case r <= 0xDBFF:
		if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
			if lo, ok := hex4(s.b[s.i+2:]); ok && 0xDC00 <= lo && lo <= 0xDFFF {
				s.i += 6
				return nil
			}
		}
	}
	return s.stringError(inName, "a lone surrogate escape %s at byte %d", s.b[at:at+6], at)
}

// hex4 decodes the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// stringError reports a string that has no single meaning. A value names
// its own path; a member name names the object it is in (the name itself
// cannot be shown as a path).
func (s *envScanner) stringError(inName bool, format string, args ...any) error {
	reason := "contains " + fmt.Sprintf(format, args...)
	if inName {
		reason = "member name " + reason
	}
	return invalid(s.field(), "%s", reason)
}

// field is the JSON path of the value being scanned: the attribute name
// at the top level, "data.items[2].name" below, "envelope" for the
// envelope object itself.
func (s *envScanner) field() string { return renderPath(s.path) }

// topField names the top-level attribute being scanned.
func (s *envScanner) topField() string { return renderPath(s.path[:min(len(s.path), 1)]) }

// maxPathLen bounds the length of a rendered path; a longer one keeps its
// beginning and its end.
const maxPathLen = 200

func renderPath(path []pathSeg) string {
	if len(path) == 0 {
		return "envelope"
	}
	var sb strings.Builder
	for k, seg := range path {
		switch {
		case seg.array:
			sb.WriteByte('[')
			sb.WriteString(strconv.Itoa(seg.index))
			sb.WriteByte(']')
		case isIdentifier(seg.name):
			if k > 0 {
				sb.WriteByte('.')
			}
			sb.Write(seg.name)
		default:
			sb.WriteByte('[')
			sb.WriteString(quoteTrunc(seg.name))
			sb.WriteByte(']')
		}
		if sb.Len() > 4*maxPathLen {
			break // the middle is cut below anyway
		}
	}
	p := sb.String()
	if len(p) <= maxPathLen {
		return p
	}
	head := runeCut(p, maxPathLen/2)
	tail := p[len(p)-maxPathLen/2:]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	if len(path) > 1 {
		// The end of the path is the part worth showing.
		var end strings.Builder
		last := path[len(path)-1]
		if last.array {
			end.WriteString("[" + strconv.Itoa(last.index) + "]")
		} else if isIdentifier(last.name) {
			end.WriteString("." + string(last.name))
		} else {
			end.WriteString("[" + quoteTrunc(last.name) + "]")
		}
		if end.Len() < maxPathLen/2 {
			tail = end.String()
		}
	}
	return head + "..." + tail
}

// isIdentifier reports whether name can be shown after a dot in a path.
func isIdentifier(name []byte) bool {
	if len(name) == 0 {
		return false
	}
	for k, c := range name {
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case k > 0 && '0' <= c && c <= '9':
		default:
			return false
		}
	}
	return true
}

// maxQuoted is how many bytes of a value an error message quotes.
const maxQuoted = 64

// quoteTrunc quotes s for an error message, on one line, cut to about
// maxQuoted bytes.
func quoteTrunc[T string | []byte](s T) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(string(s))
	}
	return strconv.Quote(runeCut(string(s), maxQuoted)) + fmt.Sprintf("... (%d bytes)", len(s))
}

// truncate cuts an unquoted ASCII token (a number) for an error message.
func truncate(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return s[:maxQuoted] + fmt.Sprintf("... (%d bytes)", len(s))
}

// runeCut returns the longest prefix of s of at most n bytes that does
// not split a UTF-8 sequence.
func runeCut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// unquote appends the unescaped contents of a string the scanner has
// accepted (without its quotes) to dst.
func unquote(b, dst []byte) []byte {
	for len(b) > 0 {
		k := bytes.IndexByte(b, '\\')
		if k < 0 {
			return append(dst, b...)
		}
		dst = append(dst, b[:k]...)
		b = b[k:]
		switch b[1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(b[2:])
			if 0xD800 <= r && r <= 0xDBFF {
				lo, _ := hex4(b[8:])
				r = (r-0xD800)<<10 | (lo - 0xDC00) + 0x10000
				b = b[6:]
			}
			dst = utf8.AppendRune(dst, r)
			b = b[6:]
			continue
		default: // '"', '\\', '/'
			dst = append(dst, b[1])
		}
		b = b[2:]
	}
	return dst
}

// syntaxError describes input that is not JSON. encoding/json words the
// problem when it agrees that the input is not JSON (the messages users
// know); the byte offset is the scanner's.
func syntaxError(raw []byte, at int) error {
	if at < len(raw) && raw[at] >= utf8.RuneSelf {
		// encoding/json would show the byte as a Latin-1 character.
		return invalid("envelope", "not a JSON object: byte 0x%02x outside a string (at byte %d)", raw[at], at)
	}
	msg := ""
	var se *json.SyntaxError
	if err := json.Unmarshal(raw, new(json.RawMessage)); errors.As(err, &se) {
		msg = se.Error()
	} else if at >= len(raw) {
		msg = "unexpected end of JSON input"
	} else {
		msg = fmt.Sprintf("invalid character %s", quoteTrunc(raw[at:at+1]))
	}
	if at >= len(raw) {
		return invalid("envelope", "not a JSON object: %s", msg)
	}
	return invalid("envelope", "not a JSON object: %s (at byte %d)", msg, at)
}
