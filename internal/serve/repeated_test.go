package serve

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRepeatedMember(t *testing.T) {
	for body, want := range map[string]string{
		`{"by":"a","by":"b","reason":"r"}`:          "by",
		`{"by":"a","reason":"r"}`:                   "",
		`{"a":{"x":1,"x":2}}`:                       "x",
		`{"a":[{"x":1},{"x":2}],"b":{"x":3}}`:       "",
		`{"a":[{"x":1,"y":[1,{"y":2,"y":3}]}]}`:     "y",
		`{"a":{"x":1},"a":2}`:                       "a",
		`{"\u0062y":"a","by":"b"}`:                  "by",
		`not json`:                                  "",
		`{"a":1`:                                    "",
		`[{"k":1},{"k":1,"k":2}]`:                   "k",
		`{"outer":{"inner":{}},"inner":1,"x":[[]]}`: "",
	} {
		require.Equal(t, want, repeatedMember([]byte(body)), body)
	}
}

// An operator action whose body names who or why twice is refused, naming
// the member: recorded as the last one's, the attribution was a guess.
func TestActionBodyWithARepeatedMemberIsRefused(t *testing.T) {
	r := start(t, Options{})
	code, body, _ := r.call(t, "POST", "/v1/admin/dlq/1/skip", testToken, map[string]string{"Content-Type": "application/json"},
		`{"by":"a","by":"b","reason":"r"}`)
	require.Equal(t, 400, code, "%v", body)
	require.Equal(t, "by", body["field"])
	require.Contains(t, body["detail"], `"by" is given twice`)
	code, body, _ = r.call(t, "POST", "/v1/admin/effects/sbx-x/resolve", testToken, map[string]string{"Content-Type": "application/json"},
		`{"state":"failed","state":"succeeded","by":"a","reason":"r"}`)
	require.Equal(t, 400, code, "%v", body)
	require.Equal(t, "state", body["field"])
}

// Whatever the bytes, repeatedMember returns and names only a member the
// body holds.
func FuzzRepeatedMember(f *testing.F) {
	for _, s := range []string{`{"by":"a","by":"b"}`, `{"a":[{"x":1},{"x":2}]}`, `[[[{}]]]`, `{"a":{"b":{"c":{"c":1}}}}`, `{`, `}`, `"x"`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if name := repeatedMember(body); name != "" && !bytes.Contains(body, []byte(name)) && !bytes.Contains(body, []byte(`\u`)) && !bytes.Contains(body, []byte(`\`)) {
			t.Fatalf("%q named in %q", name, body)
		}
	})
}
