package seqbox_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/seqbox/seqbox/seqboxtype"
)

// fuzzSeeds are envelopes for both fuzz targets: valid ones in several
// spellings, and one of every hostile class ParseEvent refuses.
var fuzzSeeds = []string{
	`{"specversion":"1.0","id":"evt-1","source":"crm","type":"order.placed","data":{"qty":10}}`,
	`{"id":"evt-2","source":"crm","type":"order.cancelled","partitionkey":"PED-4821","objectversion":7,"businesskey":"cancel:PED-4821"}`,
	`{"id":"evt-3","source":"crm","type":"t","partitionkey":"k","objectversion":"41","publishedat":"2026-10-09T12:00:00Z"}`,
	`{"id":"evt-4","source":"crm","type":"t","time":"2026-10-09T12:00:00.123456789+02:00","traceparent":"00-ab-cd-01"}`,
	`{"id":"evt-5","source":"crm","type":"t","data":null,"tenantid":"acme","causationid":"evt-4","dataschema":"v1"}`,
	`{"id":"evt-6","source":"crm","type":"t","data":{"fail":"transient","nested":{"b":[1,2.5,"x"],"a":true}}}`,
	`{ "type" : "t" , "source" : "s" , "id" : "spaced" }`,
	`{"id":"evt-7","source":"crm","type":"t","data":"<html>&amp;\u2028"}`,
	// The same facts in other spellings: one hash each.
	`{"id":"n","source":"s","type":"t","data":[1,25,0,1e21]}`,
	`{"id":"n","source":"s","type":"t","data":[1.0,25.0,-0,1000000000000000000000]}`,
	`{"id":"n","source":"s","type":"t","data":[1e0,2.5e1,0.0e5,1e+21],"publishedat":"x"}`,
	`{"id":"n","source":"s","type":"t","data":[10e-1,250E-1,-0.0,10e20],"deliverycount":3}`,
	`{"id":"é","source":"s","type":"t","data":{"é":"é","😀":"😀"}}`,
	`{"id":"\u00e9","source":"s","type":"t","data":{"\u00E9":"\u00e9","\ud83d\ude00":"\uD83D\uDE00"}}`,
	`{"data":{"b":2,"a":1},"type":"t","source":"s","id":"o"}`,
	`{"id":"o","source":"s","type":"t","data":{"a":1,"b":2}}`,
	`{"id":"big","source":"s","type":"t","data":[9007199254740992,9007199254740993,1e-400,4.9e-324,1.7976931348623157e308]}`,
	`{"id":"esc","source":"s","type":"t","data":"\/\b\f\n\r\t\"\\\u0000\u001f\u007f"}`,
	`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":9007199254740991}`,
	`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":"9223372036854775807"}`,
	// Refused: plainly invalid.
	`{"source":"s","type":"t"}`,
	`{"id":"","source":"s","type":"t"}`,
	`{"id":"a","type":"t"}`,
	`{"id":"a","source":"s"}`,
	`{"id":"a","source":"s","type":"t","objectversion":3}`,
	`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":-1}`,
	`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":1.5}`,
	`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":1.0}`,
	`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":1e0}`,
	`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":9007199254740993}`,
	`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":"x"}`,
	`{"id":"a","source":"s","type":"t","specversion":"0.3"}`,
	`{"id":"a","source":"s","type":"t","time":"soon"}`,
	`{"id":"a","source":`,
	`{"id":"a","source":"s","type":"t"}{}`,
	`{"id":"a","source":"s","type":"t"}}`,
	`{"id":"a","source":"s","type":"t",}`,
	`{"id":"a\u0000","source":"s","type":"t"}`,
	`[]`,
	`null`,
	`"string"`,
	`this line is not JSON`,
	``,
	// Refused: more than one meaning.
	"{\"id\":\"evt-\xff\",\"source\":\"s\",\"type\":\"t\"}",
	"{\"id\":\"evt-\xfe\",\"source\":\"s\",\"type\":\"t\"}",
	"{\"id\":\"a\",\"source\":\"s\",\"type\":\"t\",\"partitionkey\":\"PED-\xc0\xaf\"}",
	"{\"id\":\"\xed\xa0\x80\",\"source\":\"s\",\"type\":\"t\"}",
	"{\"id\":\"a\",\"source\":\"s\",\"type\":\"t\",\"data\":{\"n\xffme\":1}}",
	"{\"id\":\"a\",\"source\":\"s\",\"type\":\"t\"\xff}",
	`{"id":"\udc01","source":"s","type":"t"}`,
	`{"id":"\ud800x","source":"s","type":"t"}`,
	`{"id":"\ud800\u0041","source":"s","type":"t"}`,
	`{"id":"a","source":"s","type":"t","partitionkey":"\udfff"}`,
	`{"id":"a","source":"s","type":"t","data":{"\ud800":1}}`,
	`{"id":"a","source":"s","type":"t","data":[["\ud83d"]]}`,
	`{"id":"a","id":"b","source":"s","type":"t"}`,
	`{"id":"a","\u0069d":"b","source":"s","type":"t"}`,
	`{"id":"a","source":"s","type":"t","publishedat":"1","publishedat":"2"}`,
	`{"id":"a","source":"s","type":"t","data":{"x":{"a":1,"a":2}}}`,
	`{"id":"a","source":"s","type":"t","data":{"items":[{},{"name":1,"n\u0061me":2}]}}`,
	`{"id":"a","source":"s","type":"t","data":[1e400]}`,
	`{"id":"a","source":"s","type":"t","data":-1.8e308}`,
	// Refused: a number the hash would round, or a control character in a
	// key (docs/design.md §3). The exact spellings next to them pass.
	`{"id":"a","source":"s","type":"t","data":{"amount":12345678901234567891}}`,
	`{"id":"a","source":"s","type":"t","data":[0.1000000000000000055511151231257827,1.00000000000000000001,1e-400]}`,
	`{"id":"a","source":"s","type":"t","data":[9007199254740992,0.1,1e300,5e-324,2.5e1]}`,
	`{"id":"a","source":"s","type":"t","partitionkey":"PED\r\nX: 1"}`,
	"{\"id\":\"a\x7f\",\"source\":\"s\",\"type\":\"t\",\"businesskey\":\"b\"}",
}

// FuzzParseEvent checks ParseEvent's invariants on arbitrary input:
//
//   - it never panics, and a refusal is always an *InvalidEventError with
//     a Field, on one line;
//   - an accepted envelope is complete (id, source and type set), stable
//     (parsing Raw again gives the same event) and, by every reading, one
//     document: valid JSON, valid UTF-8, accepted by jcs;
//   - its Hash is SHA-256 of jcs.Transform of the envelope minus the
//     volatile attributes, computed here without seqbox's scanner;
//   - the JCS form of an accepted envelope is accepted too, with the same
//     hash and attributes (the canonical form is a fixed point).
//
// Run it for longer with `go test -run '^$' -fuzz FuzzParseEvent -fuzztime 1m`.
func FuzzParseEvent(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := seqboxtype.ParseEvent(raw)
		if err != nil {
			checkRefusal(t, raw, err)
			if len(raw) > seqboxtype.MaxEventSize {
				return
			}
			if _, jerr := jcs.Transform(raw); jerr == nil && json.Valid(raw) && bytes.HasPrefix(bytes.TrimLeft(raw, " \t\r\n"), []byte("{")) {
				// jcs accepts it as a document (one meaning: no duplicate
				// names, valid UTF-8, no lone surrogates, representable
				// numbers): the refusal must be about the attributes.
				var ie *seqboxtype.InvalidEventError
				errors.As(err, &ie)
				for _, scan := range []string{"duplicate member name", "invalid UTF-8", "lone surrogate", "outside the range", "nested deeper"} {
					if ie.Field == "envelope" || strings.Contains(ie.Reason, scan) {
						t.Fatalf("refused a document jcs accepts: %v", err)
					}
				}
			}
			return
		}
		if ev.ID == "" || ev.Source == "" || ev.Type == "" {
			t.Fatalf("accepted an envelope without identity or type: %+v", ev)
		}
		if len(ev.Hash) != 64 {
			t.Fatalf("hash %q is not a hex SHA-256", ev.Hash)
		}
		if string(ev.Raw) != string(raw) {
			t.Fatalf("Raw %q differs from the input %q", ev.Raw, raw)
		}
		if !utf8.Valid(raw) || !json.Valid(raw) {
			t.Fatalf("accepted %q, which is not UTF-8 JSON", raw)
		}
		if ev.ObjectVersion != nil && (*ev.ObjectVersion < 0 || ev.PartitionKey == "") {
			t.Fatalf("accepted objectversion %d with partitionkey %q", *ev.ObjectVersion, ev.PartitionKey)
		}
		if ev.Data != nil && !json.Valid(ev.Data) {
			t.Fatalf("Data %q is not JSON", ev.Data)
		}

		// The hash is SHA-256 of the JCS form without volatile attributes.
		canonical := canonicalWithoutVolatile(t, raw)
		if sum := sha256.Sum256(canonical); hex.EncodeToString(sum[:]) != ev.Hash {
			t.Fatalf("hash %s is not SHA-256 of the JCS form %q", ev.Hash, canonical)
		}
		// encoding/json reads the same identity (the input has one meaning).
		var std struct{ ID, Source string }
		if err := json.Unmarshal(raw, &std); err != nil || std.ID != ev.ID || std.Source != ev.Source {
			t.Fatalf("encoding/json reads id %q source %q (%v), ParseEvent %q %q", std.ID, std.Source, err, ev.ID, ev.Source)
		}

		again, err := seqboxtype.ParseEvent(ev.Raw)
		if err != nil {
			t.Fatalf("re-parsing an accepted envelope failed: %v", err)
		}
		requireSameEvent(t, ev, again)

		// The canonical form is a fixed point.
		full, err := jcs.Transform(raw)
		if err != nil {
			t.Fatalf("jcs refuses accepted envelope %q: %v", raw, err)
		}
		if twice, err := jcs.Transform(full); err != nil || !bytes.Equal(twice, full) {
			t.Fatalf("JCS of JCS %q is %q (%v)", full, twice, err)
		}
		canon, err := seqboxtype.ParseEvent(full)
		if err != nil {
			t.Fatalf("the JCS form %q of an accepted envelope is refused: %v", full, err)
		}
		requireSameEvent(t, ev, canon)
	})
}

// FuzzHashDistinct checks that the hash tells envelopes apart exactly as
// their JCS forms do: two accepted envelopes share a hash if and only if
// their canonical forms without volatile attributes are byte-equal, and
// then they also carry the same attributes.
func FuzzHashDistinct(f *testing.F) {
	for _, a := range fuzzSeeds {
		f.Add([]byte(a), []byte(fuzzSeeds[0]))
	}
	for k := 0; k+1 < len(fuzzSeeds); k++ {
		f.Add([]byte(fuzzSeeds[k]), []byte(fuzzSeeds[k+1]))
	}
	for _, pair := range [][2]string{
		{`{"id":"a","source":"s","type":"t","data":1}`, `{"id":"a","source":"s","type":"t","data":1.0}`},
		{`{"id":"a","source":"s","type":"t","data":1}`, `{"id":"a","source":"s","type":"t","data":"1"}`},
		{`{"id":"a","source":"s","type":"t","data":"é"}`, `{"id":"a","source":"s","type":"t","data":"e\u0301"}`},
		{`{"id":"a","source":"s","type":"t","data":9007199254740992}`, `{"id":"a","source":"s","type":"t","data":9007199254740993}`},
		{`{"id":"a","source":"s","type":"t","data":12345678901234567890}`, `{"id":"a","source":"s","type":"t","data":12345678901234567891}`},
		{`{"id":"a","source":"s","type":"t","publishedat":"1"}`, `{"id":"a","source":"s","type":"t","publishedat":"2"}`},
		{`{"id":"a","source":"s","type":"t"}`, `{"id":"a","source":"s","type":"t","data":null}`},
		{`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":7}`, `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":"7"}`},
	} {
		f.Add([]byte(pair[0]), []byte(pair[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ea, err := seqboxtype.ParseEvent(a)
		if err != nil {
			checkRefusal(t, a, err)
			return
		}
		eb, err := seqboxtype.ParseEvent(b)
		if err != nil {
			checkRefusal(t, b, err)
			return
		}
		ca, cb := canonicalWithoutVolatile(t, a), canonicalWithoutVolatile(t, b)
		sameForm, sameHash := bytes.Equal(ca, cb), ea.Hash == eb.Hash
		if sameForm != sameHash {
			t.Fatalf("JCS forms equal: %v, hashes equal: %v\n%q -> %q %s\n%q -> %q %s", sameForm, sameHash, a, ca, ea.Hash, b, cb, eb.Hash)
		}
		if sameHash {
			requireSameEvent(t, ea, eb)
		}
	})
}

// checkRefusal: a refusal is an *InvalidEventError that names a field and
// fits on one line.
func checkRefusal(t *testing.T, raw []byte, err error) {
	t.Helper()
	var ie *seqboxtype.InvalidEventError
	if !errors.As(err, &ie) || !errors.Is(err, seqboxtype.ErrInvalidEvent) {
		t.Fatalf("error %v (%T) is not an *InvalidEventError", err, err)
	}
	if ie.Field == "" {
		t.Fatalf("error %q for %q names no field", err, raw)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") || !utf8.ValidString(msg) || len(msg) > 600 {
		t.Fatalf("error message is not one short line of text: %q", msg)
	}
}

// canonicalWithoutVolatile is the JCS form of an accepted envelope without
// its volatile attributes, computed with encoding/json and jcs only.
func canonicalWithoutVolatile(t *testing.T, raw []byte) []byte {
	t.Helper()
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		t.Fatalf("encoding/json refuses accepted envelope %q: %v", raw, err)
	}
	for _, v := range seqboxtype.DefaultVolatileAttributes() {
		delete(members, v)
	}
	stripped, err := json.Marshal(members)
	if err != nil {
		t.Fatalf("marshal %q: %v", raw, err)
	}
	canonical, err := jcs.Transform(stripped)
	if err != nil {
		t.Fatalf("jcs refuses %q (from accepted envelope %q): %v", stripped, raw, err)
	}
	return canonical
}

// requireSameEvent: two readings of one fact agree on everything but Raw
// and the spelling of Data.
func requireSameEvent(t *testing.T, a, b seqboxtype.Event) {
	t.Helper()
	if a.Hash != b.Hash || a.ID != b.ID || a.Source != b.Source || a.Type != b.Type || a.SpecVersion != b.SpecVersion ||
		!a.Time.Equal(b.Time) || a.PartitionKey != b.PartitionKey || a.BusinessKey != b.BusinessKey ||
		a.CausationID != b.CausationID || a.TenantID != b.TenantID || a.DataSchema != b.DataSchema {
		t.Fatalf("events differ:\n%+v\n%+v", a, b)
	}
	va, oka := a.Version()
	vb, okb := b.Version()
	if va != vb || oka != okb {
		t.Fatalf("versions differ: %d %v / %d %v", va, oka, vb, okb)
	}
	if (a.Data == nil) != (b.Data == nil) {
		t.Fatalf("data %q / %q", a.Data, b.Data)
	}
	if a.Data != nil {
		ja, erra := jcs.Transform(a.Data)
		jb, errb := jcs.Transform(b.Data)
		if erra != nil || errb != nil || !bytes.Equal(ja, jb) {
			t.Fatalf("data %q / %q: JCS %q (%v) / %q (%v)", a.Data, b.Data, ja, erra, jb, errb)
		}
	}
}
