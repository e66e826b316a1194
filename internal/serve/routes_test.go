package serve

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// An unknown path answers 404 and a known path called with another method
// 405 with its Allow header, both as problem documents, like every other
// error of the gateway, behind the admin token too, and for a file the
// dashboard does not have.
func TestNotFoundAndMethodNotAllowedAreProblems(t *testing.T) {
	r := start(t, Options{})
	for _, c := range []struct {
		method, path, token string
		code                int
		allow               string
	}{
		{"GET", "/nope", "", 404, ""},
		{"GET", "/v1/nope", "", 404, ""},
		{"GET", "/v1/events", "", 405, "POST"},
		{"PUT", "/v1/events", "", 405, "POST"},
		{"OPTIONS", "/v1/events", "", 405, "POST"},
		{"DELETE", "/healthz", "", 405, "GET, HEAD"},
		{"POST", "/metrics", "", 405, "GET, HEAD"},
		{"POST", "/v1/openapi.json", "", 405, "GET, HEAD"},
		{"GET", "/v1/admin/nope", testToken, 404, ""},
		{"POST", "/v1/admin/keys", testToken, 405, "GET, HEAD"},
		{"GET", "/v1/admin/dlq/1/redrive", testToken, 405, "POST"},
		{"GET", "/ui/missing.js", "", 404, ""},
		{"POST", "/ui/", "", 405, "GET, HEAD"},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			code, body, h := r.call(t, c.method, c.path, c.token, nil, "")
			require.Equal(t, c.code, code, "%v", body)
			require.Equal(t, "application/problem+json", h.Get("Content-Type"))
			require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
			require.EqualValues(t, c.code, body["status"])
			require.Equal(t, c.path, body["instance"])
			require.NotEmpty(t, body["title"])
			require.NotEmpty(t, body["detail"])
			if c.code == 405 {
				require.Equal(t, ProblemMethod, body["type"])
				require.Equal(t, c.allow, h.Get("Allow"))
				require.Contains(t, body["detail"], c.allow)
			} else {
				require.Equal(t, ProblemNotFound, body["type"])
			}
		})
	}
	// HEAD of an unknown path: the status, without a body.
	resp, err := http.Head(r.url + "/nope")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 404, resp.StatusCode)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
}

// /v1/openapi.json lists, for each operation, every status the gateway
// answers it with, each error as a problem document; and each documented
// path called with a method it does not take answers the documented 405.
func TestOpenAPIListsEveryStatus(t *testing.T) {
	r := start(t, Options{})
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(OpenAPI(), &doc))
	adminGet := []string{"200", "401", "405", "500"}
	action := []string{"200", "400", "401", "404", "405", "409", "413", "500", "504"}
	with := func(base []string, more ...string) []string { return append(slices.Clone(base), more...) }
	want := map[string][]string{
		"post /v1/events":                                {"200", "202", "400", "401", "405", "409", "413", "415", "503"},
		"get /healthz":                                   {"200", "405"},
		"get /readyz":                                    {"200", "405", "503"},
		"get /metrics":                                   {"200", "405"},
		"get /v1/openapi.json":                           {"200", "405"},
		"get /ui/":                                       {"200", "401", "404", "405"},
		"get /v1/admin/overview":                         adminGet,
		"get /v1/admin/keys":                             with(adminGet, "400"),
		"get /v1/admin/keys/{key}":                       with(adminGet, "400", "404"),
		"post /v1/admin/keys/{key}/release":              action,
		"get /v1/admin/dlq":                              with(adminGet, "400"),
		"get /v1/admin/dlq/{seq}":                        with(adminGet, "400", "404"),
		"post /v1/admin/dlq/{seq}/redrive":               action,
		"post /v1/admin/dlq/{seq}/skip":                  action,
		"get /v1/admin/inbox":                            with(adminGet, "400"),
		"get /v1/admin/inbox/{source}/{id}":              with(adminGet, "404"),
		"get /v1/admin/collisions":                       with(adminGet, "400"),
		"get /v1/admin/audit":                            with(adminGet, "400"),
		"get /v1/admin/retention":                        adminGet,
		"get /v1/admin/requests/{seq}":                   with(adminGet, "400", "404"),
		"get /v1/admin/consumers":                        adminGet,
		"get /v1/admin/effects":                          with(adminGet, "400"),
		"post /v1/admin/effects/{key}/resolve":           {"200", "400", "401", "404", "405", "409", "413", "500"},
		"post /v1/events/{source}/{id}/steps/{name}":     {"200", "400", "401", "403", "405", "409", "410", "413", "503"},
		"post /v1/events/{source}/{id}/effects/{action}": {"200", "400", "401", "403", "405", "409", "410", "413", "503"},
	}
	got := map[string][]string{}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			var op struct {
				Responses map[string]json.RawMessage `json:"responses"`
			}
			require.NoError(t, json.Unmarshal(raw, &op))
			key := method + " " + path
			for status, resp := range op.Responses {
				got[key] = append(got[key], status)
				var ref struct {
					Ref     string                     `json:"$ref"`
					Content map[string]json.RawMessage `json:"content"`
				}
				require.NoError(t, json.Unmarshal(resp, &ref))
				if name, ok := strings.CutPrefix(ref.Ref, "#/components/responses/"); ok {
					require.Contains(t, doc.Components.Responses, name, "%s %s", key, status)
					require.NoError(t, json.Unmarshal(doc.Components.Responses[name], &ref))
				}
				if status >= "400" {
					require.Contains(t, ref.Content, "application/problem+json", "%s %s", key, status)
				}
			}
			sort.Strings(got[key])
		}
	}
	for k := range want {
		sort.Strings(want[k])
	}
	require.Equal(t, want, got)

	// Every documented path answers a method it does not take with 405.
	for path := range doc.Paths {
		concrete := strings.NewReplacer("{key}", "K", "{seq}", "1", "{source}", "S", "{id}", "I", "{name}", "N", "{action}", "A").Replace(path)
		code, body, h := r.call(t, "PUT", concrete, testToken, nil, "")
		require.Equal(t, http.StatusMethodNotAllowed, code, "PUT %s: %v", path, body)
		require.Equal(t, "application/problem+json", h.Get("Content-Type"), path)
		require.NotEmpty(t, h.Get("Allow"), path)
	}
}
