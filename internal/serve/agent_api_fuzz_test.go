package serve

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzAgentCallRequest: whatever the body, readAgentCall answers a
// problem with a status and a detail, or a request whose members fit its
// operation; it never panics.
func FuzzAgentCallRequest(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"op":"begin"}`, `{"op":"heartbeat","call":1}`,
		`{"op":"record","call":2,"state":"succeeded","result":{"a":[1,2]}}`, `{"op":"record","call":1,"state":"uncertain","error":"reset"}`,
		`{"op":"reconcile","applied":false}`, `{"op":"record","call":1,"state":"failed","result":null}`, `{"op":`, `[]`, `{"call":-1}`} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, body string, step bool) {
		kind := kindEffect
		if step {
			kind = kindStep
		}
		r := httptest.NewRequest("POST", "/v1/events/s/i/effects/a", strings.NewReader(body))
		req, p := readAgentCall(httptest.NewRecorder(), r, kind)
		if p != nil {
			if p.Status < 400 || p.Status > 499 || p.Detail == "" {
				t.Fatalf("problem %+v", p)
			}
			return
		}
		switch req.Op {
		case "begin":
		case "heartbeat", "record":
			if req.Call < 1 {
				t.Fatalf("accepted %s without a call: %+v", req.Op, req)
			}
			if req.Op == "record" && req.State == "succeeded" && kind == kindStep && req.Result == nil {
				t.Fatalf("accepted a succeeded step without result: %+v", req)
			}
		case "reconcile":
			if kind != kindEffect || req.Applied == nil {
				t.Fatalf("accepted %+v for a %s", req, kind)
			}
		default:
			t.Fatalf("accepted op %q", req.Op)
		}
	})
}

// FuzzEffectsToken: only the token minted for an event opens it; any
// other string is refused, never a panic.
func FuzzEffectsToken(f *testing.F) {
	tk := &tokens{key: []byte("0123456789abcdef0123456789abcdef")}
	good := tk.mint("gateway", "crm", "e1", "abc")
	for _, s := range []string{good, good + "x", "v1..", "v1.abc.", "", "v2.abc.def", strings.Replace(good, "abc", "abd", 1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		hash, err := tk.check(token, "gateway", "crm", "e1")
		if err == nil && (token != tk.mint("gateway", "crm", "e1", hash)) {
			t.Fatalf("accepted %q, not the minted token of hash %q", token, hash)
		}
		if _, err := tk.check(token, "gateway", "crm", "e2"); err == nil && token == good {
			t.Fatalf("e1's token opened e2")
		}
	})
}
