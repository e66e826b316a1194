package seqbox

import (
	"unicode/utf8"

	"github.com/seqbox/seqbox/seqboxtype"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A rejected envelope's source, id and partition key are shown when they
// can be read, whatever else in it is wrong: a number no double holds, or
// data nested past every decoder's depth limit, once hid all three.
// Bytes that are not one JSON object to their end show none.
func TestRejectionShowsTheIdentityItCanRead(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	for _, c := range []struct{ raw, source, id, key string }{
		{`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":1e400}`, "s", "a", "k"},
		{`{"id":"b","source":"s","type":"t","partitionkey":"k","data":` + deep + `}`, "s", "b", "k"},
		{`{"data":` + deep + `,"id":"c","source":"s"}`, "s", "c", ""},
		{`{"id":"d","source":"s","type":"t","partitionkey":"k","objectversion":"x"}`, "s", "d", "k"},
		{`{"id":7,"source":"s"}`, "s", "", ""},
		{`{"id":"e","source":"s","nested":{"id":"inner","source":"inner"}}`, "s", "e", ""},
		{`{"id":"f\u0000g","source":"s"}`, "s", "fg", ""},
		{`not json`, "", "", ""},
		{`{"id":"h","source":`, "", "", ""},
		{`{"id":"i","source":"s"} {"id":"j"}`, "", "", ""},
		{`{"id":"k","source":"s"`, "", "", ""},
		{`{"id":"l","source":"s","data":[1,2}`, "", "", ""},
		{`["id","a"]`, "", "", ""},
	} {
		source, id, key := bestEffortIdentity([]byte(c.raw))
		name := c.raw
		if len(name) > 80 {
			name = name[:80]
		}
		require.Equal(t, []string{c.source, c.id, c.key}, []string{source, id, key}, name)
	}
}

// Whatever the bytes, the identity read from a rejected envelope is text a
// store keeps and a terminal shows: valid UTF-8, no NUL, within the
// attribute limit; and reading it never panics.
func FuzzBestEffortIdentity(f *testing.F) {
	for _, seed := range []string{
		`{"id":"a","source":"s","partitionkey":"k","objectversion":1e400}`,
		`{"data":[[[[` + `]]]],"id":"c","source":"s"}`,
		`{"id":"\ud800","source":"\u0000"}`,
		`{"id":` + strings.Repeat("x", 2000) + `}`,
		`{"id":"` + strings.Repeat("é", 1000) + `"}`,
		`{`, `}`, `[`, `"id"`, ``, `{"id":{"id":"x"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, s := range func() []string { a, b, c := bestEffortIdentity(raw); return []string{a, b, c} }() {
			if !utf8.ValidString(s) || strings.ContainsRune(s, 0) || len(s) > seqboxtype.MaxAttributeSize {
				t.Fatalf("%q from %q", s, raw)
			}
		}
	})
}
