package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/stretchr/testify/require"
)

func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// A binary-mode event and its structured twin hash the same.
func TestBinaryEnvelopeMatchesStructured(t *testing.T) {
	env, err := BinaryEnvelope(headers("Ce-Specversion", "1.0", "Ce-Id", "e1", "Ce-Source", "crm", "Ce-Type", "t",
		"Ce-Partitionkey", "PED-4821", "Ce-Objectversion", "41", "Ce-Businesskey", "followup:x%3Ay", "Content-Type", "application/json"),
		[]byte(` {"b":2,"a":1} `))
	require.NoError(t, err)
	bin, err := seqboxtype.ParseEvent(env)
	require.NoError(t, err, "%s", env)
	st, err := seqboxtype.ParseEvent([]byte(`{"specversion":"1.0","id":"e1","source":"crm","type":"t","partitionkey":"PED-4821",
		"objectversion":41,"businesskey":"followup:x:y","datacontenttype":"application/json","data":{"a":1,"b":2}}`))
	require.NoError(t, err)
	require.Equal(t, st.Hash, bin.Hash)
	require.EqualValues(t, 41, *bin.ObjectVersion)
	require.Equal(t, "followup:x:y", bin.BusinessKey)
}

func TestBinaryEnvelopeData(t *testing.T) {
	base := []string{"Ce-Specversion", "1.0", "Ce-Id", "e", "Ce-Source", "s", "Ce-Type", "t"}
	for _, c := range []struct {
		name, ct, body, want string
	}{
		{"text", "text/plain; charset=utf-8", "héllo", `"data":"héllo"`},
		{"bytes", "application/octet-stream", "\x00\x01", `"data_base64":"AAE="`},
		{"no body", "", "", `"type":"t"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := headers(base...)
			if c.ct != "" {
				h.Set("Content-Type", c.ct)
			}
			env, err := BinaryEnvelope(h, []byte(c.body))
			require.NoError(t, err)
			require.Contains(t, string(env), c.want)
			_, err = seqboxtype.ParseEvent(env)
			require.NoError(t, err, "%s", env)
		})
	}
	env, err := BinaryEnvelope(headers(append(base, "Ce-Partitionkey", "k", "Ce-Objectversion", "9007199254740993")...), nil)
	require.NoError(t, err)
	require.Contains(t, string(env), `"objectversion":"9007199254740993"`)
	for name, h := range map[string]http.Header{
		"twice":    headers(append(base, "Ce-Subject", "a", "Ce-Subject", "b")...),
		"bad name": headers(append(base, "Ce-Sub_ject", "a")...),
		"bad pct":  headers(append(base, "Ce-Subject", "%zz")...),
		"bad utf8": headers(append(base, "Ce-Subject", "%ff")...),
		"data hdr": headers(append(base, "Ce-Data", "x")...),
		"no specv": headers("Ce-Id", "e", "Ce-Source", "s", "Ce-Type", "t"),
		"version":  headers(append(base, "Ce-Partitionkey", "k", "Ce-Objectversion", "7.0")...),
	} {
		env, err := BinaryEnvelope(h, nil)
		if err == nil {
			_, err = seqboxtype.ParseEvent(env)
		}
		var ie *seqboxtype.InvalidEventError
		require.True(t, errors.As(err, &ie), "%s: %v", name, err)
		require.NotEmpty(t, ie.Field, name)
	}
}

// FuzzBinaryEnvelope feeds arbitrary headers and bodies to the binary-mode
// builder: it never panics, and what it builds is valid JSON whose
// attributes are exactly the decoded headers, or an error naming a field.
func FuzzBinaryEnvelope(f *testing.F) {
	f.Add("1.0", "e1", "crm", "t", "K", "7", "application/json", []byte(`{"a":1}`))
	f.Add("1.0", "e%20", "s%2Fx", "t", "", "", "text/plain", []byte("héllo"))
	f.Add("1.0", "e", "s", "t", "k", "9007199254740993", "", []byte{0, 1, 2})
	f.Add("0.3", "", "s", "t", "k", "-1", "application/cloudevents+json", []byte(`{`))
	f.Add("1.0", "%ff", "s", "t", "k", "1e3", "application/x+json; charset=utf-8", []byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, spec, id, source, typ, key, version, ct string, body []byte) {
		h := http.Header{}
		for _, kv := range [][2]string{{"Ce-Specversion", spec}, {"Ce-Id", id}, {"Ce-Source", source}, {"Ce-Type", typ},
			{"Ce-Partitionkey", key}, {"Ce-Objectversion", version}, {"Content-Type", ct}} {
			if kv[1] != "" {
				h.Set(kv[0], kv[1])
			}
		}
		env, err := BinaryEnvelope(h, body)
		if err != nil {
			var ie *seqboxtype.InvalidEventError
			if !errors.As(err, &ie) || ie.Field == "" {
				t.Fatalf("error without a field: %v", err)
			}
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(env, &m); err != nil {
			t.Fatalf("not JSON: %v: %q", err, env)
		}
		var got string
		if raw, ok := m["id"]; ok && id != "" {
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("id is not a string: %s", raw)
			}
		}
		ev, err := seqboxtype.ParseEvent(env)
		if err != nil {
			var ie *seqboxtype.InvalidEventError
			if !errors.As(err, &ie) || ie.Field == "" {
				t.Fatalf("ParseEvent error without a field: %v", err)
			}
			return
		}
		if ev.ID != got {
			t.Fatalf("id %q became %q", got, ev.ID)
		}
	})
}
