package seqboxtype

import (
	"bytes"
	"slices"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// canonical returns the RFC 8785 form of doc. Most envelopes need no
// conversion of their numbers or strings: integers of up to 15 digits are
// already written as RFC 8785 writes them, and so are strings without
// escapes. For those, canonicalPlain sorts the members and drops the
// whitespace; anything else (a fraction, an exponent, a longer integer,
// -0, an escape, a control character, a name outside ASCII, nesting past
// plainNesting) goes to jcs.Transform, which decodes and re-encodes every
// value. Both give the same bytes wherever canonicalPlain answers
// (FuzzCanonicalPlainIsJCS); canonicalPlain decodes and re-encodes no
// value (docs/benchmarks-history.md §9).
func canonical(doc []byte) ([]byte, error) {
	if out, ok := canonicalPlain(doc); ok {
		return out, nil
	}
	return jcs.Transform(doc)
}

// plainNesting is how deep canonicalPlain follows arrays and objects
// before it leaves the document to jcs.
const plainNesting = 64

// canonicalPlain writes doc's RFC 8785 form when doc keeps to the subset
// described at canonical, and reports whether it did.
func canonicalPlain(doc []byte) ([]byte, bool) {
	p := plainCanon{in: doc, out: make([]byte, 0, len(doc))}
	p.space()
	if !p.value(0) {
		return nil, false
	}
	p.space()
	if p.i != len(p.in) {
		return nil, false
	}
	return p.out, true
}

// plainCanon is canonicalPlain's state: the input, the position in it,
// and the output so far.
type plainCanon struct {
	in  []byte
	i   int
	out []byte
	// members is scratch space for the objects being sorted.
	members []plainMember
}

// plainMember is one member of an object written to out in input order:
// its name (quotes included) and where its value sits in out.
type plainMember struct {
	name       []byte
	start, end int
}

func (p *plainCanon) space() {
	for p.i < len(p.in) {
		switch p.in[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *plainCanon) value(depth int) bool {
	if p.i >= len(p.in) {
		return false
	}
	switch c := p.in[p.i]; {
	case c == '{':
		return depth < plainNesting && p.object(depth+1)
	case c == '[':
		return depth < plainNesting && p.array(depth+1)
	case c == '"':
		s, ok := p.str(false)
		p.out = append(p.out, s...)
		return ok
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(p.in[p.i:], []byte(lit)) {
			p.i += len(lit)
			p.out = append(p.out, lit...)
			return true
		}
	}
	return false
}

// str reads a string without escapes and returns it with its quotes.
// Names must be ASCII (then byte order is RFC 8785's UTF-16 order);
// values may hold any valid UTF-8 but no control character.
func (p *plainCanon) str(name bool) ([]byte, bool) {
	start := p.i
	p.i++
	ascii := true
	for p.i < len(p.in) {
		c := p.in[p.i]
		switch {
		case c == '"':
			p.i++
			s := p.in[start:p.i]
			if !ascii && (name || !utf8.Valid(s)) {
				return nil, false
			}
			return s, true
		case c == '\\' || c < 0x20 || c == 0x7f:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
		p.i++
	}
	return nil, false
}

// number copies an integer of at most 15 digits (exact as a double, and
// written by RFC 8785 as it is here); -0 and everything else fail.
func (p *plainCanon) number() bool {
	start := p.i
	if p.in[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.in) && p.in[p.i] >= '0' && p.in[p.i] <= '9' {
		p.i++
	}
	n := p.i - digits
	switch {
	case n == 0 || n > 15:
		return false
	case p.in[digits] == '0' && (n > 1 || digits > start):
		return false // a leading zero, or -0
	case p.i < len(p.in) && (p.in[p.i] == '.' || p.in[p.i] == 'e' || p.in[p.i] == 'E'):
		return false
	}
	p.out = append(p.out, p.in[start:p.i]...)
	return true
}

func (p *plainCanon) array(depth int) bool {
	p.i++
	p.out = append(p.out, '[')
	p.space()
	if p.i < len(p.in) && p.in[p.i] == ']' {
		p.i++
		p.out = append(p.out, ']')
		return true
	}
	for {
		p.space()
		if !p.value(depth) {
			return false
		}
		p.space()
		if p.i >= len(p.in) {
			return false
		}
		switch p.in[p.i] {
		case ',':
			p.i++
			p.out = append(p.out, ',')
		case ']':
			p.i++
			p.out = append(p.out, ']')
			return true
		default:
			return false
		}
	}
}

// object writes the members' values to out in input order, then rewrites
// that stretch of out with the members sorted by name.
func (p *plainCanon) object(depth int) bool {
	p.i++
	p.space()
	if p.i < len(p.in) && p.in[p.i] == '}' {
		p.i++
		p.out = append(p.out, '{', '}')
		return true
	}
	base := len(p.members)
	defer func() { p.members = p.members[:base] }()
	from := len(p.out)
	for {
		p.space()
		if p.i >= len(p.in) || p.in[p.i] != '"' {
			return false
		}
		name, ok := p.str(true)
		if !ok {
			return false
		}
		p.space()
		if p.i >= len(p.in) || p.in[p.i] != ':' {
			return false
		}
		p.i++
		p.space()
		start := len(p.out)
		if !p.value(depth) {
			return false
		}
		p.members = append(p.members, plainMember{name: name, start: start, end: len(p.out)})
		p.space()
		if p.i >= len(p.in) {
			return false
		}
		if p.in[p.i] == '}' {
			p.i++
			break
		}
		if p.in[p.i] != ',' {
			return false
		}
		p.i++
	}
	ms := p.members[base:]
	// Names compare without their quotes: "a" before "a ".
	slices.SortFunc(ms, func(a, b plainMember) int { return bytes.Compare(a.name[1:len(a.name)-1], b.name[1:len(b.name)-1]) })
	for k := 1; k < len(ms); k++ {
		if bytes.Equal(ms[k-1].name, ms[k].name) {
			return false // a repeated name: jcs refuses it
		}
	}
	values := slices.Clone(p.out[from:])
	p.out = append(p.out[:from], '{')
	for k, m := range ms {
		if k > 0 {
			p.out = append(p.out, ',')
		}
		p.out = append(p.out, m.name...)
		p.out = append(p.out, ':')
		p.out = append(p.out, values[m.start-from:m.end-from]...)
	}
	p.out = append(p.out, '}')
	return true
}
