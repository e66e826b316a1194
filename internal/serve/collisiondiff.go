package serve

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
)

// Field changes in a collision's diff, from the first payload to the
// second.
const (
	FieldAdded   = "added"   // only the second envelope has the field
	FieldRemoved = "removed" // only the first envelope has it
	FieldChanged = "changed" // both have it, with different values
)

// FieldDiff is one field that differs between the two envelopes of a
// collision.
type FieldDiff struct {
	// Path names the field: a top-level attribute (["type"]), or a key
	// inside an object attribute such as data, one segment per level
	// (["data", "customer", "id"]).
	Path []string `json:"path"`
	// Change is added, removed or changed.
	Change string `json:"change"`
	// First and Second are the field's JSON values (absent on the side
	// that lacks the field).
	First  json.RawMessage `json:"first,omitempty"`
	Second json.RawMessage `json:"second,omitempty"`
}

// diffEnvelopes compares two envelopes field by field: every top-level
// attribute, and the keys of object values (data's) recursively; arrays
// and scalars are compared whole. ok is false when either is not a JSON
// object (a payload retention purged, or binary bytes): there is nothing
// to compare field by field.
func diffEnvelopes(first, second []byte) (diffs []FieldDiff, ok bool) {
	a, okA := decodeObject(first)
	b, okB := decodeObject(second)
	if !okA || !okB {
		return nil, false
	}
	diffs = []FieldDiff{}
	diffObjects(nil, a, b, &diffs)
	return diffs, true
}

// decodeObject decodes a JSON object, keeping numbers as written.
func decodeObject(raw []byte) (map[string]any, bool) {
	if raw == nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		return nil, false
	}
	return m, true
}

// diffObjects appends the differences between a and b under path, in key
// order.
func diffObjects(path []string, a, b map[string]any, out *[]FieldDiff) {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := append(slices.Clip(path), k)
		va, inA := a[k]
		vb, inB := b[k]
		switch {
		case !inA:
			*out = append(*out, FieldDiff{Path: p, Change: FieldAdded, Second: rawJSON(vb)})
		case !inB:
			*out = append(*out, FieldDiff{Path: p, Change: FieldRemoved, First: rawJSON(va)})
		default:
			oa, aObj := va.(map[string]any)
			ob, bObj := vb.(map[string]any)
			if aObj && bObj {
				diffObjects(p, oa, ob, out)
			} else if !reflect.DeepEqual(va, vb) {
				*out = append(*out, FieldDiff{Path: p, Change: FieldChanged, First: rawJSON(va), Second: rawJSON(vb)})
			}
		}
	}
}

// rawJSON encodes a decoded value again.
func rawJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSpace(b.Bytes())
}
