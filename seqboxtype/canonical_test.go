package seqboxtype

import (
	"testing"

	"github.com/gowebpki/jcs"
)

var canonicalSeeds = []string{
	`{"id":"b-1","specversion":"1.0","source":"bench","type":"bench.step","partitionkey":"r-k1","objectversion":1,"data":{"n":1}}`,
	` { "b" : [1, -2, 0, true, false, null, {"z":1,"a":"x"}], "a" : {} , "a ":[] } `,
	`{"name":"Zoë","n":123456789012345,"m":-1}`,
	`{"a":1.5}`, `{"a":1e3}`, `{"a":-0}`, `{"a":0123}`, `{"a":1234567890123456}`,
	`{"a":"\u0041"}`, `{"a":"x","a":"y"}`, `{"é":1,"e":2}`, "{\"a\":\"\x01\"}", "{\"a\":\"\x7f\"}",
	`[]`, `[[]]`, `"s"`, `12`, `{"a":1,}`, `{"a" 1}`, `[1 2]`, `{"a":1} x`, "{\"a\":\"\xff\"}",
	`{"a":"\u2028"}`, "{\"a\":\"\u2028\"}", `{"emoji":"😀","k":{"y":[{"b":2,"a":1}]}}`,
	`{"source":"https://example.com/a/b?x=1&y=<2>","t":"a'b"}`, `{"a":"<>&/"}`, `{"a":"é中😀"}`,
	`{"a":999999999999999,"b":-999999999999999,"A":true}`,
}

// Wherever canonicalPlain answers, it gives exactly what jcs gives, and
// jcs accepts the document; the seeds include what it must leave to jcs.
func TestCanonicalPlainIsJCS(t *testing.T) {
	answered := 0
	for _, s := range canonicalSeeds {
		if checkPlainIsJCS(t, []byte(s)) {
			answered++
		}
	}
	if answered < 5 {
		t.Fatalf("canonicalPlain answered %d of the seeds; the envelopes seqbox sees most should not go to jcs", answered)
	}
	for _, s := range []string{`{"a":1.5}`, `{"a":-0}`, `{"a":"\u0041"}`, `{"a":"x","a":"y"}`, `{"é":1}`, `{"a":1234567890123456}`} {
		if _, ok := canonicalPlain([]byte(s)); ok {
			t.Errorf("canonicalPlain answered %s, which needs jcs", s)
		}
	}
	got, ok := canonicalPlain([]byte(` { "b" : [1, {"z":1,"a":"x"}], "a" : {} , "a ":[] } `))
	if want := `{"a":{},"a ":[],"b":[1,{"a":"x","z":1}]}`; !ok || string(got) != want {
		t.Errorf("canonicalPlain = %s, %v; want %s", got, ok, want)
	}
}

func FuzzCanonicalPlainIsJCS(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) { checkPlainIsJCS(t, doc) })
}

// checkPlainIsJCS fails when canonicalPlain answers doc differently from
// jcs, and reports whether it answered.
func checkPlainIsJCS(t *testing.T, doc []byte) bool {
	t.Helper()
	got, ok := canonicalPlain(doc)
	if !ok {
		return false
	}
	want, err := jcs.Transform(doc)
	if err != nil {
		t.Fatalf("canonicalPlain answered %q, which jcs refuses: %v", doc, err)
	}
	if string(got) != string(want) {
		t.Fatalf("canonicalPlain(%q) = %q, jcs = %q", doc, got, want)
	}
	return true
}

// BenchmarkCanonical compares the two ways to the canonical form on an
// envelope as `seqbox bench` sends it.
func BenchmarkCanonical(b *testing.B) {
	doc := []byte(canonicalSeeds[0])
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			if _, ok := canonicalPlain(doc); !ok {
				b.Fatal("not plain")
			}
		}
	})
	b.Run("jcs", func(b *testing.B) {
		for b.Loop() {
			if _, err := jcs.Transform(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
