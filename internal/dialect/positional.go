package dialect

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Positional returns q with its $n placeholders written as anonymous ?
// placeholders, and args in the order those now take them (an argument
// named twice is passed twice), for SQLite.
//
// Why: modernc.org/sqlite binds each parameter after asking SQLite for its
// name, and SQLite finds the name of parameter i by a walk of the list of
// named parameters. A statement with n named parameters ($n is a name to
// SQLite) is n²/2 steps to bind, so that a batch's multi-row INSERT (128
// rows of 15 columns) would spend more CPU binding than executing
// (docs/benchmarks-history.md §9). Anonymous parameters are not in that
// list.
//
// q is returned unchanged, with args, when it has no $n, when it already
// uses another kind of placeholder (?, ?n, :name, @name, $name), or when a
// $n has no argument (the driver then reports the mistake as it would
// have). $ inside a string literal, a quoted identifier or a comment is
// not a placeholder. The rewrite of each text is computed once.
func Positional(q string, args []any) (string, []any) {
	p := positionalOf(q)
	if p.order == nil || p.need > len(args) {
		return q, args
	}
	out := make([]any, len(p.order))
	for i, n := range p.order {
		out[i] = args[n]
	}
	return p.text, out
}

// positionalText is one text's rewrite: the text with ? placeholders,
// the argument index each takes in order, and how many arguments the
// original names (its largest n). order is nil when q is not rewritten.
type positionalText struct {
	text  string
	order []int
	need  int
}

// positionalTexts caches positionalOf. Texts are the program's own
// (statements and their multi-row expansions), so the cache is bounded by
// the program, as the statement caches are.
var positionalTexts sync.Map

// positionalCacheLimit bounds the cache against texts that vary per call;
// past it, texts are rewritten on each call.
const positionalCacheLimit = 4096

// positionalCached counts the texts cached.
var positionalCached atomic.Int32

func positionalOf(q string) positionalText {
	if v, ok := positionalTexts.Load(q); ok {
		return v.(positionalText)
	}
	p := rewritePositional(q)
	if positionalCached.Load() < positionalCacheLimit {
		if _, loaded := positionalTexts.LoadOrStore(q, p); !loaded {
			positionalCached.Add(1)
		}
	}
	return p
}

// rewritePositional scans q as SQLite tokenizes it: '…' strings, "…",
// `…` and […] identifiers, -- and /* */ comments are copied as they are.
func rewritePositional(q string) positionalText {
	var out []byte
	var order []int
	need := 0
	for i := 0; i < len(q); {
		if j := skippedEnd(q, i); j > i {
			out = append(out, q[i:j]...)
			i = j
			continue
		}
		switch c := q[i]; c {
		case '?', ':', '@':
			if c == '?' || i+1 < len(q) && isNameChar(q[i+1]) {
				// Another kind of placeholder: leave the text alone.
				return positionalText{text: q}
			}
			out = append(out, c)
			i++
		case '$':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			if j == i+1 || j < len(q) && isNameChar(q[j]) {
				return positionalText{text: q}
			}
			n, err := strconv.Atoi(q[i+1 : j])
			if err != nil || n < 1 || q[i+1] == '0' {
				return positionalText{text: q}
			}
			order = append(order, n-1)
			need = max(need, n)
			out = append(out, '?')
			i = j
		default:
			out = append(out, c)
			i++
		}
	}
	if order == nil {
		return positionalText{text: q}
	}
	return positionalText{text: string(out), order: order, need: need}
}

// skippedEnd returns the index just past the token at q[i] that holds no
// placeholder: a quoted string or identifier (a doubled quote inside it is
// part of it), a bracketed identifier, or a comment; i itself when q[i]
// starts none of them. An unterminated one runs to the end of q.
func skippedEnd(q string, i int) int {
	switch c := q[i]; {
	case c == '\'' || c == '"' || c == '`':
		for j := i + 1; j < len(q); j++ {
			if q[j] != c {
				continue
			}
			if j+1 < len(q) && q[j+1] == c {
				j++
				continue
			}
			return j + 1
		}
		return len(q)
	case c == '[':
		return endAfter(q, i+1, "]")
	case strings.HasPrefix(q[i:], "--"):
		if j := strings.IndexByte(q[i:], '\n'); j >= 0 {
			return i + j
		}
		return len(q)
	case strings.HasPrefix(q[i:], "/*"):
		return endAfter(q, i+2, "*/")
	}
	return i
}

// endAfter returns the index just past the first end in q from i, or
// len(q).
func endAfter(q string, i int, end string) int {
	if j := strings.Index(q[i:], end); j >= 0 {
		return i + j + len(end)
	}
	return len(q)
}

// isNameChar says c may continue a parameter's name ($name, :name).
func isNameChar(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
