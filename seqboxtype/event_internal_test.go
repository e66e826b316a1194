package seqboxtype

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseEventVolatileList: the consumer's own volatile attributes are
// left out of the hash, and only those.
func TestParseEventVolatileList(t *testing.T) {
	base := `{"id":"a","source":"s","type":"t","data":{"x":1}`
	hash := func(raw string, volatile []string) string {
		t.Helper()
		ev, err := ParseEventExcluding([]byte(raw), volatile)
		require.NoError(t, err, raw)
		return ev.Hash
	}
	custom := []string{"x-delivery", "publishedat"}
	want := hash(base+`}`, custom)
	require.Equal(t, want, hash(base+`,"x-delivery":"broker-7"}`, custom))
	require.Equal(t, want, hash(`{"x-delivery":1,`+base[1:]+`,"publishedat":"now"}`, custom))
	require.NotEqual(t, want, hash(base+`,"traceparent":"00-ab-cd-01"}`, custom), "traceparent is not in this list")

	// With no volatile attributes every member counts.
	require.NotEqual(t, hash(base+`}`, nil), hash(base+`,"publishedat":"now"}`, nil))
	require.Equal(t, hash(base+`}`, nil), hash(base+`}`, defaultVolatile))
}

// TestScanEnvelopeMembers: the scanner finds each top-level member where
// it is, names unescaped.
func TestScanEnvelopeMembers(t *testing.T) {
	raw := []byte(` { "a" : 1 , "\u0062":{"a":[1,{"b":2}]},"c":"x\"y"}` + "\n")
	ms, err := scanEnvelope(raw)
	require.NoError(t, err)
	require.Len(t, ms, 3)
	var got [][3]string
	for _, m := range ms {
		got = append(got, [3]string{string(m.name), string(raw[m.nameAt:m.valAt]), string(raw[m.valAt:m.valEnd])})
	}
	require.Equal(t, [][3]string{
		{"a", `"a" : `, "1"},
		{"b", `"\u0062":`, `{"a":[1,{"b":2}]}`},
		{"c", `"c":`, `"x\"y"`},
	}, got)
}

func TestUnquote(t *testing.T) {
	for in, want := range map[string]string{
		``:                          ``,
		`abc`:                       `abc`,
		`a\"b\\c\/d\be\ff\ng\rh\ti`: "a\"b\\c/d\be\ff\ng\rh\ti",
		`\u00e9\u00E9é`:             `ééé`,
		`\ud83d\ude00x\uD83D\uDE00`: "😀x😀",
		`\u0000\u001f\uffff`:        "\x00\x1f\uffff",
	} {
		require.Equal(t, want, string(unquote([]byte(in), nil)), in)
	}
}

func TestRenderPath(t *testing.T) {
	seg := func(name string) pathSeg { return pathSeg{name: []byte(name)} }
	idx := func(n int) pathSeg { return pathSeg{array: true, index: n} }
	for want, path := range map[string][]pathSeg{
		"envelope":                {},
		"id":                      {seg("id")},
		`["a b"]`:                 {seg("a b")},
		"data.items[2].name":      {seg("data"), seg("items"), idx(2), seg("name")},
		`data[""]["x\ty"][0]._z9`: {seg("data"), seg(""), seg("x\ty"), idx(0), seg("_z9")},
		`data["9a"]["é"]`:         {seg("data"), seg("9a"), seg("é")},
	} {
		require.Equal(t, want, renderPath(path))
	}
}

// BenchmarkScanEnvelope is the strict scan alone (compare
// BenchmarkParseEvent, which adds the attributes and the RFC 8785 hash).
func BenchmarkScanEnvelope(b *testing.B) {
	raw := []byte(`{"specversion":"1.0","id":"evt-01J9Z3K4M5N6P7Q8","source":"crm.example.com/orders",` +
		`"type":"order.cancelled","time":"2026-10-09T12:00:00.123Z","partitionkey":"PED-4821","objectversion":7,` +
		`"businesskey":"cancel:PED-4821","causationid":"evt-01J9Z3K4M5N6P7Q7","tenantid":"acme",` +
		`"dataschema":"order/v2","publishedat":"2026-10-09T12:00:01Z",` +
		`"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",` +
		`"data":{"order":"PED-4821","total":129.9,"currency":"EUR",` +
		`"items":[{"sku":"A-1","qty":2,"price":39.95},{"sku":"B-7","qty":1,"price":50}],"refund":true,"note":null}}`)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := scanEnvelope(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// Parses share scratch memory through a pool: side by side, and after a
// parse of a larger or a refused envelope, each gets its own envelope's
// members, and the scratch given back holds nothing of its input.
func TestParseScratchIsNotShared(t *testing.T) {
	bodies := [][]byte{
		[]byte(`{"id":"a","source":"s","type":"t","partitionkey":"k1","objectversion":1,"data":{"x":[1,2,{"y":"z"}]}}`),
		[]byte(`{"id":"b","source":"s2","type":"t2"}`),
		[]byte(`{"id":"c","source":"s","type":"t","data":{"a":{"b":{"c":{"d":1}}}},"tenantid":"x","businesskey":"bk"}`),
	}
	want := make([]Event, len(bodies))
	for i, b := range bodies {
		ev, err := ParseEvent(b)
		require.NoError(t, err)
		want[i] = ev
	}
	done := make(chan error)
	for g := range 8 {
		go func() {
			for n := range 300 {
				i := (g + n) % len(bodies)
				if n%7 == 0 {
					_, _ = ParseEvent([]byte(`{"id":"x","id":"y"}`)) // refused halfway
				}
				ev, err := ParseEvent(bodies[i])
				if err != nil || ev.ID != want[i].ID || ev.Hash != want[i].Hash || ev.PartitionKey != want[i].PartitionKey {
					done <- fmt.Errorf("parse %d of body %d: %+v, %v", n, i, ev, err)
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		require.NoError(t, <-done)
	}

	sc := scratchPool.Get().(*envScratch)
	_, err := sc.scan(bodies[2])
	require.NoError(t, err)
	sc.release()
	for _, m := range sc.top[:cap(sc.top)] {
		require.Nil(t, m.name, "no reference to the input kept")
	}
	for _, n := range sc.names[:cap(sc.names)] {
		require.Nil(t, n)
	}
}
