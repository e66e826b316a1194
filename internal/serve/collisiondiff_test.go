package serve

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The diff names every top-level attribute and every data key, at any
// depth, that was added, removed or changed; equal fields are left out,
// arrays and scalars compare whole, and numbers keep how they were
// written.
func TestDiffEnvelopes(t *testing.T) {
	first := `{"specversion":"1.0","id":"c1","source":"crm","type":"order.updated","subject":"x",
		"data":{"amount":10,"currency":"EUR","customer":{"id":"k-1","tier":"gold"},"lines":[1,2],"note":null,"big":12345678901234567890}}`
	second := `{"specversion":"1.0","id":"c1","source":"crm","type":"order.changed","time":"2026-01-02T03:04:05Z",
		"data":{"amount":10.5,"currency":"EUR","customer":{"id":"k-1","tier":"silver","vip":true},"lines":[1,2,3],"big":12345678901234567891}}`
	diffs, ok := diffEnvelopes([]byte(first), []byte(second))
	require.True(t, ok)
	type row struct{ path, change, first, second string }
	var got []row
	for _, d := range diffs {
		p := ""
		for i, s := range d.Path {
			if i > 0 {
				p += "."
			}
			p += s
		}
		got = append(got, row{p, d.Change, string(d.First), string(d.Second)})
	}
	require.Equal(t, []row{
		{"data.amount", FieldChanged, "10", "10.5"},
		{"data.big", FieldChanged, "12345678901234567890", "12345678901234567891"},
		{"data.customer.tier", FieldChanged, `"gold"`, `"silver"`},
		{"data.customer.vip", FieldAdded, "", "true"},
		{"data.lines", FieldChanged, "[1,2]", "[1,2,3]"},
		{"data.note", FieldRemoved, "null", ""},
		{"subject", FieldRemoved, `"x"`, ""},
		{"time", FieldAdded, "", `"2026-01-02T03:04:05Z"`},
		{"type", FieldChanged, `"order.updated"`, `"order.changed"`},
	}, got)
}

// A value that turns from an object into something else is one change;
// identical envelopes have an empty diff; what is not a JSON object
// (purged, binary, an array) cannot be compared field by field.
func TestDiffEnvelopesEdges(t *testing.T) {
	diffs, ok := diffEnvelopes([]byte(`{"data":{"a":{"b":1}}}`), []byte(`{"data":{"a":"<html>"}}`))
	require.True(t, ok)
	require.Equal(t, []FieldDiff{{Path: []string{"data", "a"}, Change: FieldChanged, First: []byte(`{"b":1}`), Second: []byte(`"<html>"`)}}, diffs)

	diffs, ok = diffEnvelopes([]byte(`{"id":"x","data":{"a":1}}`), []byte(`{"data":{"a":1},"id":"x"}`))
	require.True(t, ok)
	require.Empty(t, diffs)
	require.NotNil(t, diffs, "an empty diff is a list, not null")

	for _, pair := range [][2][]byte{{nil, []byte(`{}`)}, {[]byte(`{}`), []byte{0xff, 0x00}}, {[]byte(`[1]`), []byte(`{}`)}, {[]byte(`{} {}`), []byte(`{}`)}} {
		_, ok := diffEnvelopes(pair[0], pair[1])
		require.False(t, ok, "%q", pair)
	}
}
