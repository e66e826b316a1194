package seqbox_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/stretchr/testify/require"
)

func TestParseEventValid(t *testing.T) {
	raw := []byte(`{"specversion":"1.0","id":"evt-482","source":"crm","type":"order.cancelled",
		"time":"2026-10-09T12:00:00Z","partitionkey":"PED-4821","objectversion":7,
		"businesskey":"cancel:PED-4821","causationid":"evt-481","tenantid":"acme",
		"dataschema":"order/v2","publishedat":"2026-10-09T12:00:01Z","data":{"qty":10,"note":"<b>"}}`)
	ev, err := seqboxtype.ParseEvent(raw)
	require.NoError(t, err)
	require.Equal(t, "evt-482", ev.ID)
	require.Equal(t, "crm", ev.Source)
	require.Equal(t, "order.cancelled", ev.Type)
	require.Equal(t, "1.0", ev.SpecVersion)
	require.True(t, ev.Time.Equal(time.Date(2026, 10, 9, 12, 0, 0, 0, time.UTC)), "time = %s", ev.Time)
	require.Equal(t, "PED-4821", ev.PartitionKey)
	v, ok := ev.Version()
	require.True(t, ok)
	require.Equal(t, int64(7), v)
	require.Equal(t, "cancel:PED-4821", ev.BusinessKey)
	require.Equal(t, "evt-481", ev.CausationID)
	require.Equal(t, "acme", ev.TenantID)
	require.Equal(t, "order/v2", ev.DataSchema)
	require.JSONEq(t, `{"qty":10,"note":"<b>"}`, string(ev.Data))
	require.Equal(t, raw, ev.Raw, "Raw must be the envelope exactly as received")
	require.Len(t, ev.Hash, 64, "hex SHA-256")

	// Raw is a copy: the caller may reuse its buffer.
	raw[0] = ' '
	require.Equal(t, byte('{'), ev.Raw[0])
}

func TestParseEventOptionalAttributes(t *testing.T) {
	ev, err := seqboxtype.ParseEvent([]byte(`{"id":"a","source":"s","type":"t"}`))
	require.NoError(t, err)
	_, ok := ev.Version()
	require.False(t, ok, "no objectversion means no version")
	require.Nil(t, ev.ObjectVersion)
	require.True(t, ev.Time.IsZero())
	require.Empty(t, ev.PartitionKey)
	require.Empty(t, ev.BusinessKey)

	// objectversion as a string (CloudEvents extensions often are) and zero;
	// above 2^53-1 only as a string (the hash reads JSON numbers as doubles).
	for raw, want := range map[string]int64{
		`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":"41"}`:                  41,
		`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":0}`:                     0,
		`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":-0}`:                    0,
		`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":9007199254740991}`:      9007199254740991,
		`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":"9007199254740993"}`:    9007199254740993,
		`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":"9223372036854775807"}`: 9223372036854775807,
	} {
		ev, err := seqboxtype.ParseEvent([]byte(raw))
		require.NoError(t, err, raw)
		v, ok := ev.Version()
		require.True(t, ok, raw)
		require.Equal(t, want, v, raw)
	}
}

func TestParseEventInvalid(t *testing.T) {
	tests := []struct {
		name  string
		raw   string
		field string // "envelope" for errors about the document as a whole
		want  string // substring of the message
	}{
		{"missing id", `{"source":"s","type":"t"}`, "id", "missing"},
		{"empty id", `{"id":"  ","source":"s","type":"t"}`, "id", "empty"},
		{"numeric id", `{"id":5,"source":"s","type":"t"}`, "id", "string"},
		{"missing source", `{"id":"a","type":"t"}`, "source", "missing"},
		{"empty source", `{"id":"a","source":"","type":"t"}`, "source", "empty"},
		{"missing type", `{"id":"a","source":"s"}`, "type", "missing"},
		{"null type", `{"id":"a","source":"s","type":null}`, "type", "string"},
		{"bad specversion", `{"id":"a","source":"s","type":"t","specversion":"0.3"}`, "specversion", "0.3"},
		{"bad time", `{"id":"a","source":"s","type":"t","time":"yesterday"}`, "time", "RFC 3339"},
		{"non-string partitionkey", `{"id":"a","source":"s","type":"t","partitionkey":7}`, "partitionkey", "string"},
		{"non-string businesskey", `{"id":"a","source":"s","type":"t","businesskey":["x"]}`, "businesskey", "string"},
		{"objectversion text", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":"seven"}`, "objectversion", "integer"},
		{"objectversion fraction", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":1.5}`, "objectversion", "integer"},
		{"objectversion bool", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":true}`, "objectversion", "integer"},
		{"objectversion overflow", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":99999999999999999999}`, "objectversion", `"99999999999999999999" does not fit in a 64-bit integer`},
		{"objectversion 1.0", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":1.0}`, "objectversion", `"1.0" is not written as an integer: write 1 or "1"`},
		{"objectversion 1e0", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":1e0}`, "objectversion", `"1e0" is not written as an integer: write 1 or "1"`},
		{"objectversion string 1.0", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":"1.0"}`, "objectversion", `"1.0" is not written as an integer: write 1 or "1"`},
		{"objectversion string 1e0", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":"1e0"}`, "objectversion", `"1e0" is not written as an integer: write 1 or "1"`},
		{"objectversion above 2^53-1", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":9007199254740992}`, "objectversion", "9007199254740992 is larger than 2^53-1 as a JSON number"},
		{"objectversion negative", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":-1}`, "objectversion", "negative"},
		{"objectversion without partitionkey", `{"id":"a","source":"s","type":"t","objectversion":3}`, "objectversion", "partitionkey"},
		{"objectversion object", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":{}}`, "objectversion", "must be an integer, not an object"},
		{"bad JSON", `{"id":"a","source":`, "envelope", "not a JSON object: unexpected end of JSON input"},
		{"JSON array", `[{"id":"a","source":"s","type":"t"}]`, "envelope", "not a JSON object but an array"},
		{"JSON null", `null`, "envelope", "not a JSON object but null"},
		{"empty body", ``, "envelope", "JSON"},
		{"not JSON", "this line is not JSON", "envelope", "not a JSON object: invalid character 'h' in literal true (expecting 'r') (at byte 1)"},
		{"JSON string", `"string"`, "envelope", "not a JSON object but a string"},
		{"JSON number", ` 42 `, "envelope", "not a JSON object but a number"},
		{"trailing comma", `{"id":"a","source":"s","type":"t",}`, "envelope", "not a JSON object: invalid character '}' looking for beginning of object key string (at byte 34)"},
		{"control character in a string", "{\"id\":\"a\nb\",\"source\":\"s\",\"type\":\"t\"}", "envelope", "not a JSON object: invalid character '\\n' in string literal (at byte 8)"},
		{"trailing brace", `{"id":"a","source":"s","type":"t"}}`, "envelope", "trailing data after the JSON object at byte 34"},
		{"trailing data", `{"id":"a","source":"s","type":"t"} {"id":"b"}`, "envelope", "trailing data after the JSON object at byte 35"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := seqboxtype.ParseEvent([]byte(tt.raw))
			require.Error(t, err)
			require.ErrorIs(t, err, seqboxtype.ErrInvalidEvent)
			var ie *seqboxtype.InvalidEventError
			require.True(t, errors.As(err, &ie), "want *InvalidEventError, got %T", err)
			require.Equal(t, tt.field, ie.Field)
			require.True(t, strings.HasPrefix(err.Error(), "invalid event: "+tt.field+": "), "the message names the field: %s", err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseEventOversized(t *testing.T) {
	env := `{"id":"a","source":"s","type":"t","data":""}`
	pad := strings.Repeat("x", seqboxtype.MaxEventSize-len(env))
	_, err := seqboxtype.ParseEvent([]byte(`{"id":"a","source":"s","type":"t","data":"` + pad + `"}`))
	require.NoError(t, err, "exactly MaxEventSize bytes is accepted")
	_, err = seqboxtype.ParseEvent([]byte(`{"id":"a","source":"s","type":"t","data":"` + pad + `x"}`))
	requireInvalid(t, err, "envelope", "envelope: 1048577 bytes, larger than the 1048576-byte limit")
}

func TestParseEventHash(t *testing.T) {
	hash := func(t *testing.T, raw string) string {
		t.Helper()
		ev, err := seqboxtype.ParseEvent([]byte(raw))
		require.NoError(t, err, raw)
		return ev.Hash
	}
	base := hash(t, `{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"}}`)

	t.Run("volatile attributes are ignored", func(t *testing.T) {
		for _, raw := range []string{
			`{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"},"publishedat":"2026-10-09T12:00:00Z"}`,
			`{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"},"publishedat":"2026-10-10T08:30:00Z"}`,
			`{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
			`{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"},"tracestate":"vendor=1"}`,
		} {
			require.Equal(t, base, hash(t, raw), raw)
		}
	})
	t.Run("key order and whitespace are ignored", func(t *testing.T) {
		require.Equal(t, base, hash(t, `{ "data" : { "sku" : "A" , "qty" : 10 } ,
			"type":"order.placed",	"source":"crm", "id":"evt-482" }`))
	})
	t.Run("data changes the hash", func(t *testing.T) {
		require.NotEqual(t, base, hash(t, `{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":12,"sku":"A"}}`))
		require.NotEqual(t, base, hash(t, `{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A","extra":true}}`))
		require.NotEqual(t, base, hash(t, `{"id":"evt-482","source":"crm","type":"order.placed"}`))
	})
	t.Run("identity and other attributes change the hash", func(t *testing.T) {
		require.NotEqual(t, base, hash(t, `{"id":"evt-483","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"}}`))
		require.NotEqual(t, base, hash(t, `{"id":"evt-482","source":"erp","type":"order.placed","data":{"qty":10,"sku":"A"}}`))
		require.NotEqual(t, base, hash(t, `{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"},"businesskey":"b"}`))
	})
}

// benchEvent is a realistic envelope of about 500 bytes: every attribute
// seqbox reads, two volatile ones and a small nested data member.
var benchEvent = []byte(`{"specversion":"1.0","id":"evt-01J9Z3K4M5N6P7Q8","source":"crm.example.com/orders",` +
	`"type":"order.cancelled","time":"2026-10-09T12:00:00.123Z","partitionkey":"PED-4821","objectversion":7,` +
	`"businesskey":"cancel:PED-4821","causationid":"evt-01J9Z3K4M5N6P7Q7","tenantid":"acme",` +
	`"dataschema":"order/v2","publishedat":"2026-10-09T12:00:01Z",` +
	`"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",` +
	`"data":{"order":"PED-4821","total":129.9,"currency":"EUR",` +
	`"items":[{"sku":"A-1","qty":2,"price":39.95},{"sku":"B-7","qty":1,"price":50}],"refund":true,"note":null}}`)

func BenchmarkParseEvent(b *testing.B) {
	b.SetBytes(int64(len(benchEvent)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := seqboxtype.ParseEvent(benchEvent); err != nil {
			b.Fatal(err)
		}
	}
}

// requireInvalid checks that err is an *InvalidEventError naming field,
// on one line, whose message contains want.
func requireInvalid(t *testing.T, err error, field, want string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, seqboxtype.ErrInvalidEvent)
	var ie *seqboxtype.InvalidEventError
	require.True(t, errors.As(err, &ie), "want *InvalidEventError, got %T", err)
	require.Equal(t, field, ie.Field, "field of %q", err.Error())
	require.True(t, strings.HasPrefix(err.Error(), "invalid event: "+field+": "), "the message names the field: %s", err)
	require.Contains(t, err.Error(), want)
	require.NotContains(t, err.Error(), "\n", "messages are one line")
	require.True(t, utf8.ValidString(err.Error()), "message %q is not UTF-8", err.Error())
}

// TestParseEventAmbiguous: input with more than one meaning has no identity
// and is refused, naming where the problem is (docs/design.md §3).
func TestParseEventAmbiguous(t *testing.T) {
	const ok = `"source":"s","type":"t"`
	deep := `{"id":"a",` + ok + `,"data":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`
	tests := []struct {
		name  string
		raw   string
		field string
		want  string
	}{
		// Bytes that are not UTF-8: encoding/json would read each as U+FFFD.
		{"invalid byte in id", "{\"id\":\"evt-\xff\"," + ok + "}", "id", "id: contains invalid UTF-8 at byte 11"},
		{"other invalid byte in id", "{\"id\":\"evt-\xfe\"," + ok + "}", "id", "id: contains invalid UTF-8 at byte 11"},
		{"invalid first byte of id", "{\"id\":\"\x80\"," + ok + "}", "id", "id: contains invalid UTF-8 at byte 7"},
		{"truncated sequence in id", "{\"id\":\"\xe2\x82\"," + ok + "}", "id", "contains invalid UTF-8 at byte 7"},
		{"overlong encoding in id", "{\"id\":\"\xc0\xaf\"," + ok + "}", "id", "contains invalid UTF-8 at byte 7"},
		{"UTF-8 encoded surrogate in id", "{\"id\":\"\xed\xa0\x80\"," + ok + "}", "id", "contains invalid UTF-8 at byte 7"},
		{"invalid byte in source", "{\"id\":\"a\",\"source\":\"s\xff\",\"type\":\"t\"}", "source", "source: contains invalid UTF-8 at byte 21"},
		{"invalid byte in partitionkey", "{\"id\":\"a\"," + ok + ",\"partitionkey\":\"PED-\xff\"}", "partitionkey", "invalid UTF-8"},
		{"invalid byte in a volatile attribute", "{\"id\":\"a\"," + ok + ",\"publishedat\":\"\xff\"}", "publishedat", "invalid UTF-8"},
		{"invalid byte in data", "{\"id\":\"a\"," + ok + ",\"data\":{\"items\":[1,{\"name\":\"\xff\"}]}}", "data.items[1].name", "invalid UTF-8"},
		{"invalid byte in a data member name", "{\"id\":\"a\"," + ok + ",\"data\":{\"x\":{\"n\xffme\":1}}}", "data.x", "data.x: member name contains invalid UTF-8 at byte"},
		{"invalid byte in an attribute name", "{\"i\xffd\":\"a\"," + ok + "}", "envelope", "envelope: member name contains invalid UTF-8 at byte 3"},
		{"invalid byte between members", "{\"id\":\"a\",\xff" + ok + "}", "envelope", "envelope: not a JSON object: byte 0xff outside a string (at byte 10)"},
		{"byte order mark", "\xef\xbb\xbf{\"id\":\"a\"," + ok + "}", "envelope", "envelope: not a JSON object: byte 0xef outside a string (at byte 0)"},
		{"no-break space between members", "{\"id\":\"a\",\u00a0" + ok + "}", "envelope", "byte 0xc2 outside a string (at byte 10)"},

		// Lone surrogate escapes: encoding/json would read each as U+FFFD.
		{"lone low surrogate in id", `{"id":"\udc01",` + ok + `}`, "id", `id: contains a lone surrogate escape \udc01 at byte 7`},
		{"high surrogate then a letter", `{"id":"\ud800x",` + ok + `}`, "id", `lone surrogate escape \ud800 at byte 7`},
		{"high surrogate at the end", `{"id":"a\uD800",` + ok + `}`, "id", `lone surrogate escape \uD800 at byte 8`},
		{"high surrogate then a non-surrogate escape", `{"id":"\ud800\u0041",` + ok + `}`, "id", `lone surrogate escape \ud800`},
		{"two high surrogates", `{"id":"\ud800\ud800",` + ok + `}`, "id", `lone surrogate escape \ud800 at byte 7`},
		{"low then high surrogate", `{"id":"\ude00\ud83d",` + ok + `}`, "id", `lone surrogate escape \ude00`},
		{"lone surrogate in partitionkey", `{"id":"a",` + ok + `,"partitionkey":"PED-\udfff"}`, "partitionkey", `lone surrogate escape \udfff`},
		{"lone surrogate in a data member name", `{"id":"a",` + ok + `,"data":{"\ud800":1}}`, "data", `data: member name contains a lone surrogate escape \ud800`},
		{"lone surrogate deep in data", `{"id":"a",` + ok + `,"data":{"a b":[0,["\udc01"]]}}`, `data["a b"][1][0]`, `lone surrogate escape \udc01`},
		{"lone surrogate in an attribute name", `{"i\udc01d":"a",` + ok + `}`, "envelope", `member name contains a lone surrogate escape \udc01 at byte 3`},

		// A member name twice in one object.
		{"duplicate id", `{"id":"a","id":"b",` + ok + `}`, "id", `id: duplicate member name "id" (at byte 10)`},
		{"duplicate id, same value", `{"id":"a","id":"a",` + ok + `}`, "id", `duplicate member name "id"`},
		{"duplicate id spelled with an escape", `{"id":"a","\u0069d":"b",` + ok + `}`, "id", `duplicate member name "id"`},
		{"duplicate id spelled with two escapes", `{"\u0069\u0064":"a","id":"b",` + ok + `}`, "id", `duplicate member name "id"`},
		{"duplicate volatile attribute", `{"id":"a",` + ok + `,"publishedat":"x","publishedat":"y"}`, "publishedat", `duplicate member name "publishedat"`},
		{"duplicate in data", `{"id":"a",` + ok + `,"data":{"x":{"a":1,"b":2,"a":1}}}`, "data.x.a", `data.x.a: duplicate member name "a"`},
		{"duplicate in an array element", `{"id":"a",` + ok + `,"data":{"items":[{},{},{"name":"x","name":"y"}]}}`, "data.items[2].name", `duplicate member name "name"`},
		{"duplicate via the solidus escape", `{"id":"a",` + ok + `,"data":{"a/b":1,"a\/b":2}}`, `data["a/b"]`, `duplicate member name "a/b"`},
		{"duplicate via a surrogate pair", `{"id":"a",` + ok + `,"data":{"😀":1,"\ud83d\ude00":2}}`, `data["😀"]`, `duplicate member name "😀"`},
		{"duplicate empty name", `{"id":"a",` + ok + `,"data":{"":1,"":2}}`, `data[""]`, `duplicate member name ""`},
		{"duplicate in a large object", `{"id":"a",` + ok + `,"data":{` + manyMembers(100) + `,"m7":0}}`, "data.m7", `duplicate member name "m7"`},

		// Numbers RFC 8785 cannot represent.
		{"number too large", `{"id":"a",` + ok + `,"data":{"x":[1e400]}}`, "data.x[0]", "number 1e400 is outside the range of an IEEE-754 double"},
		{"negative number too large", `{"id":"a",` + ok + `,"data":-1.8e308}`, "data", "number -1.8e308 is outside the range"},
		{"integer too large", `{"id":"a",` + ok + `,"data":1` + strings.Repeat("0", 400) + `}`, "data", "is outside the range of an IEEE-754 double"},
		{"objectversion too large", `{"id":"a",` + ok + `,"partitionkey":"k","objectversion":1e400}`, "objectversion", "outside the range"},

		{"nested too deep", deep, "data", "data: nested deeper than 10000 arrays and objects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := seqboxtype.ParseEvent([]byte(tt.raw))
			requireInvalid(t, err, tt.field, tt.want)
		})
	}
}

// manyMembers is n members "m0":0,"m1":0,... without braces.
func manyMembers(n int) string {
	ms := make([]string, n)
	for k := range ms {
		ms[k] = `"m` + strconv.Itoa(k) + `":0`
	}
	return strings.Join(ms, ",")
}

// TestParseEventUnambiguous: what looks close to the refused input but has
// one meaning is accepted.
func TestParseEventUnambiguous(t *testing.T) {
	for _, tt := range []struct {
		raw    string
		id     string
		pkey   string
		source string
	}{
		{`{"id":"\ud83d\ude00","source":"s","type":"t"}`, "😀", "", "s"},
		{`{"id":"\uD83D\uDE00","source":"s","type":"t"}`, "😀", "", "s"},
		{`{"id":"😀","source":"s","type":"t"}`, "😀", "", "s"},
		{`{"id":"a\u0062\/\"\\","source":"s","type":"t"}`, "ab/\"\\", "", "s"},
		{`{"\u0069d":"a","source":"s","type":"t"}`, "a", "", "s"},
		{`{"id":"a","source":"\u00e9","type":"t","partitionkey":"\uffff\ufdd0"}`, "a", "\uffff\ufdd0", "é"},
		// The same name in different objects, or at different depths.
		{`{"id":"a","source":"s","type":"t","data":{"id":"b","x":{"id":"c"},"y":[{"id":1},{"id":2}]}}`, "a", "", "s"},
		{`{"id":"a","source":"s","type":"t","data":{` + manyMembers(100) + `}}`, "a", "", "s"},
		// The extremes of a double, each exactly the number RFC 8785 writes.
		{`{"id":"a","source":"s","type":"t","data":[-0,0.0,5e-324,1.7976931348623157e308]}`, "a", "", "s"},
	} {
		ev, err := seqboxtype.ParseEvent([]byte(tt.raw))
		require.NoError(t, err, tt.raw)
		require.Equal(t, tt.id, ev.ID, tt.raw)
		require.Equal(t, tt.source, ev.Source, tt.raw)
		require.Equal(t, tt.pkey, ev.PartitionKey, tt.raw)
	}
}

// TestParseEventNesting: data may nest up to 10000 arrays and objects in
// all, the envelope object included (the limit of encoding/json and jcs).
func TestParseEventNesting(t *testing.T) {
	nested := func(n int) []byte {
		return []byte(`{"id":"a","source":"s","type":"t","data":` + strings.Repeat(`[{"k":`, n/2) + strings.Repeat("[", n%2) +
			"0" + strings.Repeat("]", n%2) + strings.Repeat(`}]`, n/2) + `}`)
	}
	_, err := seqboxtype.ParseEvent(nested(9999))
	require.NoError(t, err)
	_, err = seqboxtype.ParseEvent(nested(10000))
	requireInvalid(t, err, "data", "data: nested deeper than 10000 arrays and objects")
}

// TestParseEventIDsDifferingInInvalidBytes: encoding/json read both ids as
// "evt-\uFFFD", so two different producers' events merged into one
// identity. Both are refused now.
func TestParseEventIDsDifferingInInvalidBytes(t *testing.T) {
	for _, raw := range []string{
		"{\"id\":\"evt-\xff\",\"source\":\"s\",\"type\":\"t\"}",
		"{\"id\":\"evt-\xfe\",\"source\":\"s\",\"type\":\"t\"}",
		`{"id":"evt-\udc01","source":"s","type":"t"}`,
		`{"id":"evt-\udc02","source":"s","type":"t"}`,
	} {
		_, err := seqboxtype.ParseEvent([]byte(raw))
		requireInvalid(t, err, "id", "id: contains ")
	}
	ev, err := seqboxtype.ParseEvent([]byte(`{"id":"evt-\ufffd","source":"s","type":"t"}`))
	require.NoError(t, err, "U+FFFD itself, written as such, is a character like any other")
	require.Equal(t, "evt-\uFFFD", ev.ID)
}

// TestParseEventErrorsAreShort: a message quotes at most about 64 bytes of
// any value and stays on one line whatever the input holds.
func TestParseEventErrorsAreShort(t *testing.T) {
	long := strings.Repeat("ab\n\x01", 1000)
	for _, tt := range []struct {
		raw   string
		field string
	}{
		{`{"id":"a","source":"s","type":"t","specversion":"` + strings.NewReplacer("\n", `\n`, "\x01", `\u0001`).Replace(long) + `"}`, "specversion"},
		{`{"id":"a","source":"s","type":"t","time":"` + strings.Repeat("é", 500) + `"}`, "time"},
		{`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":"` + strings.Repeat("9", 5000) + `"}`, "objectversion"},
		{`{"id":"a","source":"s","type":"t","data":{"` + strings.Repeat("é", 500) + `":1,"` + strings.Repeat(`\u00e9`, 500) + `":2}}`, `data["` + strings.Repeat("é", 32) + `"... (1000 bytes)]`},
		{`{"id":"a","source":"s","type":"t","data":` + strings.Repeat(`{"k\nk":`, 200) + `1e999` + strings.Repeat("}", 200) + `}`, "data" + strings.Repeat(`["k\nk"]`, 12) + `...["k\nk"]`},
		{`{"id":"a","source":"s","type":"t","data":[` + strings.Repeat("9", 5000) + `e9]}`, "data[0]"},
	} {
		_, err := seqboxtype.ParseEvent([]byte(tt.raw))
		requireInvalid(t, err, tt.field, "")
		require.Less(t, len(err.Error()), 400, err.Error())
	}
}

// TestParseEventData: Data is the data member exactly as received.
func TestParseEventData(t *testing.T) {
	raw := `{"id":"a","source":"s","type":"t","data": { "n" : 9007199254740992.0, "s":"\u00e9" } }`
	ev, err := seqboxtype.ParseEvent([]byte(raw))
	require.NoError(t, err)
	require.Equal(t, `{ "n" : 9007199254740992.0, "s":"\u00e9" }`, string(ev.Data))

	ev, err = seqboxtype.ParseEvent([]byte(`{"id":"a","source":"s","type":"t","data":null}`))
	require.NoError(t, err)
	require.Equal(t, "null", string(ev.Data))

	ev, err = seqboxtype.ParseEvent([]byte(`{"id":"a","source":"s","type":"t"}`))
	require.NoError(t, err)
	require.Nil(t, ev.Data)

	// Appending to Data must not write into Raw.
	ev, err = seqboxtype.ParseEvent([]byte(`{"id":"a","source":"s","type":"t","data":[1],"z":2}`))
	require.NoError(t, err)
	_ = append(ev.Data, 'x')
	require.Equal(t, `{"id":"a","source":"s","type":"t","data":[1],"z":2}`, string(ev.Raw))
}

// TestParseEventCanonicalHash: the hash is SHA-256 of the RFC 8785 form,
// which compares by value.
func TestParseEventCanonicalHash(t *testing.T) {
	hash := func(t *testing.T, raw string) string {
		t.Helper()
		ev, err := seqboxtype.ParseEvent([]byte(raw))
		require.NoError(t, err, raw)
		return ev.Hash
	}
	env := func(data string) string {
		return `{"id":"evt-1","source":"crm","type":"order.placed","data":` + data + `}`
	}
	t.Run("is SHA-256 of the RFC 8785 form", func(t *testing.T) {
		sum := sha256.Sum256([]byte(`{"data":{"a":[1,"é",true,null],"b":25},"id":"evt-1","source":"crm","type":"order.placed"}`))
		require.Equal(t, hex.EncodeToString(sum[:]),
			hash(t, `{ "type":"order.placed", "publishedat":"2026-10-09T12:00:00Z", "data" : {"b":2.5e1, "a":[1.0,"\u00e9",true,null]}, "id":"evt-1","source":"crm"}`))
	})
	t.Run("RFC 8785 section 3.2.2 example", func(t *testing.T) {
		input := `{
  "numbers": [333333333.3333333, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
		want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
		sum := sha256.Sum256([]byte(`{"data":` + want + `,"id":"evt-1","source":"crm","type":"order.placed"}`))
		require.Equal(t, hex.EncodeToString(sum[:]), hash(t, env(input)))
	})
	for _, group := range [][]string{
		{`1`, `1.0`, `1e0`, `10e-1`, `1E+0`, `0.1e1`, `1.000000000000000000000`},
		{`25`, `25.0`, `2.5e1`, `250e-1`, `2.50E1`},
		{`0`, `-0`, `0.0`, `0e10`, `-0.0e-5`, `0e-400`},
		{`1e21`, `1000000000000000000000`, `1e+21`},
		{`9007199254740992`, `9007199254740992.0`, `9.007199254740992e15`},
		{`"é"`, `"\u00e9"`, `"\u00E9"`},
		{`"😀"`, `"\ud83d\ude00"`, `"\uD83D\uDE00"`},
		{`"/"`, `"\/"`, `"\u002f"`},
		{`"\n"`, `"\u000a"`, `"\u000A"`},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, ` { "b" : 2 ,` + "\n\t" + `"a" : 1 } `, `{"\u0062":2,"a":1}`},
	} {
		t.Run("one hash for "+strings.Join(group, " "), func(t *testing.T) {
			want := hash(t, env(group[0]))
			for _, data := range group[1:] {
				require.Equal(t, want, hash(t, env(data)), data)
			}
		})
	}
	t.Run("different values, different hashes", func(t *testing.T) {
		seen := map[string]string{}
		for _, data := range []string{
			`1`, `"1"`, `1.5`, `-1`, `true`, `null`, `[]`, `{}`, `[1]`, `[1,2]`, `[2,1]`, `{"a":1}`, `{"a":"1"}`,
			`{"a":null}`, `"é"`, `"e\u0301"`, `"E"`, `""`, `" "`, `"\u0000"`, `9007199254740994`, `{"a":{"b":1}}`, `{"a":[{"b":1}]}`,
		} {
			h := hash(t, env(data))
			require.NotContains(t, seen, h, "%s and %s share a hash", data, seen[h])
			seen[h] = data
		}
		require.NotContains(t, seen, hash(t, `{"id":"evt-1","source":"crm","type":"order.placed"}`), "no data")
	})
	t.Run("volatile attributes are ignored", func(t *testing.T) {
		want := hash(t, env(`{"qty":10}`))
		for _, extra := range []string{
			`"publishedat":"2026-10-09T12:00:00Z"`,
			`"publishedat":null`,
			`"publishe\u0064at":"2026-10-10T08:30:00Z"`,
			`"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"vendor=1"`,
			`"deliverycount":3,"deliveryattempt":{"n":2}`,
		} {
			require.Equal(t, want, hash(t, `{`+extra+`,"id":"evt-1","source":"crm","type":"order.placed","data":{"qty":10}}`), extra)
			require.Equal(t, want, hash(t, `{"id":"evt-1","source":"crm","type":"order.placed",`+extra+`,"data":{"qty":10}}`), extra)
			require.Equal(t, want, hash(t, `{"id":"evt-1","source":"crm","type":"order.placed","data":{"qty":10},`+extra+`}`), extra)
		}
		// Only top-level attributes are volatile.
		require.NotEqual(t, want, hash(t, env(`{"qty":10,"publishedat":"x"}`)))
		require.NotEqual(t, want, hash(t, `{"id":"evt-1","source":"crm","type":"order.placed","data":{"qty":10},"PublishedAt":"x"}`))
	})
}

func BenchmarkParseEventLarge(b *testing.B) {
	items := make([]string, 2000)
	for k := range items {
		items[k] = `{"sku":"A-` + strconv.Itoa(k) + `","qty":` + strconv.Itoa(k%7) + `,"price":39.95,"note":"caf\u00e9 \ud83d\ude00"}`
	}
	raw := []byte(`{"id":"a","source":"s","type":"t","publishedat":"x","data":{"items":[` + strings.Join(items, ",") + `]}}`)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := seqboxtype.ParseEvent(raw); err != nil {
			b.Fatal(err)
		}
	}
}
