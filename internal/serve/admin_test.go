package serve

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// blockKey makes key K blocked: v1 fails permanently (dead-lettered), v2
// parks behind it. It returns the DLQ seq.
func blockKey(t *testing.T, r *running, key string) int64 {
	t.Helper()
	r.post(t, ev(key+"-1", key, 1, `{"fail":"permanent"}`))
	r.post(t, ev(key+"-2", key, 2, `{"n":2}`))
	var seq int64
	eventually(t, key+" blocked with a successor", func() bool {
		keys := list(t, r.admin(t, "GET", "/v1/admin/keys", "", 200), "keys")
		for _, k := range keys {
			if k["partitionkey"] == key && k["status"] == "blocked" && k["blocked_messages"] == float64(1) {
				by := k["blocked_by"].(map[string]any)
				seq = int64(by["dlq_seq"].(float64))
				return true
			}
		}
		return false
	})
	return seq
}

// Without the admin token, or with a wrong one, every admin endpoint
// answers 401 with a problem body, and nothing changes.
func TestAdminRequiresTheToken(t *testing.T) {
	r := start(t, Options{})
	seq := blockKey(t, r, "K")
	paths := []struct{ method, path string }{
		{"GET", "/v1/admin/keys"}, {"GET", "/v1/admin/keys/K"}, {"POST", "/v1/admin/keys/K/release"},
		{"GET", "/v1/admin/dlq"}, {"GET", "/v1/admin/dlq/" + itoa(seq)}, {"POST", "/v1/admin/dlq/" + itoa(seq) + "/redrive"},
		{"POST", "/v1/admin/dlq/" + itoa(seq) + "/skip"}, {"GET", "/v1/admin/collisions"}, {"GET", "/v1/admin/audit?object=K"},
		{"GET", "/v1/admin/retention"}, {"GET", "/v1/admin/overview"}, {"GET", "/v1/admin/nope"},
	}
	for _, p := range paths {
		for _, tok := range []string{"", "wrong-token-wrong-token", testToken + "x", strings.ToUpper(testToken)} {
			code, body, h := r.call(t, p.method, p.path, tok, map[string]string{"Content-Type": "application/json"},
				`{"by":"mallory","reason":"because"}`)
			require.Equal(t, http.StatusUnauthorized, code, "%s %s with %q", p.method, p.path, tok)
			require.Equal(t, "application/problem+json", h.Get("Content-Type"))
			require.Contains(t, h.Get("WWW-Authenticate"), "Bearer")
			require.EqualValues(t, 401, body["status"])
		}
	}
	letter, err := r.store.Executor().DeadLetterGet(context.Background(), store.DeadLetterRef{Consumer: "gateway", Seq: seq})
	require.NoError(t, err)
	require.Equal(t, seqboxtype.DeadLetterOpen, letter.State, "nothing changed")
	reqs, err := r.store.Executor().RequestListPending(context.Background(), "gateway")
	require.NoError(t, err)
	require.Empty(t, reqs, "no operator request recorded")
	require.EqualValues(t, 0, r.effects(t))
}

// Without a configured admin token the admin API and the dashboard are
// disabled: 401 with a body that says how to enable them.
func TestAdminDisabledWithoutToken(t *testing.T) {
	r := start(t, Options{AdminToken: "-"})
	for _, p := range []string{"/v1/admin/keys", "/ui/"} {
		code, body, _ := r.call(t, "GET", p, "anything-anything", nil, "")
		require.Equal(t, http.StatusUnauthorized, code)
		require.Contains(t, body["detail"], "--admin-token", p)
	}
	// A browser gets a page, not JSON: how to turn the dashboard on,
	// and nothing about this gateway.
	for _, p := range []string{"/ui/", "/ui/app.js"} {
		req, err := http.NewRequest("GET", r.url+p, nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		page, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
		require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
		require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
		for _, s := range []string{"<h1>The seqbox dashboard is turned off</h1>", "--admin-token", "SEQBOX_ADMIN_TOKEN", "/ui/", "sessionStorage"} {
			require.Contains(t, string(page), s)
		}
		require.NotContains(t, string(page), r.opt.DB, "the page tells nothing of this gateway")
	}
}

// The redrive of a blocked key's dead letter is an operator request
// executed by the server's consumer; it records who asked, and the key
// clears with its successor applied.
func TestAdminRedriveAndSkip(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := start(t, Options{DB: db(t)})
			seq := blockKey(t, r, "K")
			detail := r.admin(t, "GET", "/v1/admin/dlq/"+itoa(seq), "", 200)
			require.Contains(t, detail["envelope"].(map[string]any)["text"], `"fail":"permanent"`)
			key := r.admin(t, "GET", "/v1/admin/keys/K", "", 200)
			require.Len(t, list(t, key, "parked"), 1)
			require.Equal(t, "POST", list(t, key, "actions")[0]["method"])

			// Skip needs who and why, named in the problem.
			body := r.admin(t, "POST", "/v1/admin/dlq/"+itoa(seq)+"/skip", `{"by":"alice"}`, 400)
			require.Equal(t, "reason", body["field"])
			body = r.admin(t, "POST", "/v1/admin/dlq/"+itoa(seq)+"/skip", `{"by":"alice","reason":"x","extra":1}`, 400)
			require.Equal(t, "extra", body["field"])
			body = r.admin(t, "POST", "/v1/admin/dlq/"+itoa(seq)+"/skip", `{"by":7}`, 400)
			require.Equal(t, "by", body["field"])

			// Redriving the same poison fails again (on the same DLQ row,
			// which stays open), the key stays blocked.
			res := r.admin(t, "POST", "/v1/admin/dlq/"+itoa(seq)+"/redrive", `{"by":"alice","reason":"try again"}`, 200)
			require.Equal(t, "done", res["state"])
			require.Equal(t, "alice", res["by"])
			require.Equal(t, "dead_lettered", list(t, res, "results")[0]["outcome"])
			require.Equal(t, res["results"], res["decisions"], "decisions is the old name of results, kept as an alias")

			dls := list(t, r.admin(t, "GET", "/v1/admin/dlq", "", 200), "dead_letters")
			require.Len(t, dls, 1)
			seq2 := int64(dls[0]["seq"].(float64))
			require.Equal(t, seq, seq2, "a dead letter keeps its number")
			r.admin(t, "POST", "/v1/admin/dlq/"+itoa(seq2)+"/skip", ``, 400)
			res = r.call2(t, "POST", "/v1/admin/dlq/"+itoa(seq2)+"/skip", map[string]string{"Seqbox-By": "bob", "Seqbox-Reason": "refunded by hand"}, 200)
			ds := list(t, res, "results")
			require.Equal(t, res["results"], res["decisions"])
			require.Equal(t, "applied", ds[len(ds)-1]["outcome"], "%v", ds)
			req, err := r.store.Executor().RequestGet(context.Background(), int64(res["request"].(float64)))
			require.NoError(t, err)
			require.Equal(t, "bob", req.RequestedBy)
			require.Equal(t, "refunded by hand", req.Reason)
			require.Empty(t, list(t, r.admin(t, "GET", "/v1/admin/keys", "", 200), "keys"))
			require.EqualValues(t, 1, r.effects(t))
			audit := r.admin(t, "GET", "/v1/admin/audit?object=K", "", 200)
			require.NotEmpty(t, list(t, audit, "audit"))
			byID := r.admin(t, "GET", "/v1/admin/audit?id=K-1", "", 200)
			require.Len(t, list(t, byID, "identities"), 1)
			r.admin(t, "GET", "/v1/admin/audit?object=K&id=K-1", "", 400)
			r.admin(t, "GET", "/v1/admin/dlq/99999", "", 404)
			r.admin(t, "GET", "/v1/admin/dlq/abc", "", 400)
			r.admin(t, "GET", "/v1/admin/keys/nope", "", 404)
		})
	}
}

// call2 is an admin call with extra headers.
func (r *running) call2(t *testing.T, method, path string, headers map[string]string, want int) map[string]any {
	t.Helper()
	code, m, _ := r.call(t, method, path, testToken, headers, "")
	require.Equal(t, want, code, "%v", m)
	return m
}

// A key blocked by a gap (hold expiry = block) is released through the
// API with a recorded gap.
func TestAdminRelease(t *testing.T) {
	r := start(t, Options{})
	r.post(t, ev("g1", "G", 1, ""))
	r.post(t, ev("g3", "G", 3, ""))
	eventually(t, "g3 held", func() bool { return len(list(t, r.admin(t, "GET", "/v1/admin/keys", "", 200), "keys")) == 1 })
	r.admin(t, "POST", "/v1/admin/keys/G/release", `{"by":"carol","reason":"v2 never existed"}`, 409) // held, not blocked
	r.admin(t, "POST", "/v1/admin/keys/nope/release", `{"by":"carol","reason":"x"}`, 404)
}

// Collisions show both payloads side by side.
func TestAdminCollisionsShowBothPayloads(t *testing.T) {
	r := start(t, Options{})
	r.post(t, ev("c1", "C", 1, `{"amount":10}`))
	eventually(t, "c1 applied", func() bool { return r.effects(t) == 1 })
	r.postWant(t, ev("c1", "C", 1, `{"amount":99}`), http.StatusConflict)
	var cs []map[string]any
	eventually(t, "the collision", func() bool {
		cs = list(t, r.admin(t, "GET", "/v1/admin/collisions", "", 200), "collisions")
		return len(cs) == 1
	})
	require.Contains(t, cs[0]["first"].(map[string]any)["text"], `{"amount":10}`)
	require.Contains(t, cs[0]["second"].(map[string]any)["text"], `{"amount":99}`)
	require.Equal(t, "applied", cs[0]["first_outcome"])
}

// A collision of an identity that is parked (held for a gap) or
// dead-lettered shows the payload it was first recorded with, read from
// that identity's own rows (its parked message, its dead letter), on both
// stores; a held message of another key is no collision.
func TestAdminCollisionsFindTheFirstPayloadParkedOrDeadLettered(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := start(t, Options{DB: db(t)})
			r.post(t, ev("h1", "H", 1, `{"n":1}`))
			r.post(t, ev("h3", "H", 3, `{"amount":3}`)) // held: v2 is missing
			r.post(t, ev("d1", "D", 1, `{"fail":"permanent"}`))
			r.post(t, ev("x3", "X", 3, `{"n":3}`)) // another held message, with a collision of its own key nowhere
			eventually(t, "h3 held and d1 dead-lettered", func() bool {
				c := r.admin(t, "GET", "/v1/admin/overview", "", 200)["counts"].(map[string]any)
				return c["held"] == float64(1) && c["dead_letters"] == float64(1)
			})
			r.postWant(t, ev("h3", "H", 3, `{"amount":30}`), http.StatusConflict)
			r.postWant(t, ev("d1", "D", 1, `{"fail":"no"}`), http.StatusConflict)
			var cs []map[string]any
			eventually(t, "two collisions", func() bool {
				cs = list(t, r.admin(t, "GET", "/v1/admin/collisions", "", 200), "collisions")
				return len(cs) == 2
			})
			byID := map[string]map[string]any{}
			for _, c := range cs {
				byID[c["id"].(string)] = c
			}
			require.Contains(t, byID["h3"]["first"].(map[string]any)["text"], `{"amount":3}`, "from its held message")
			require.Contains(t, byID["h3"]["second"].(map[string]any)["text"], `{"amount":30}`)
			require.Contains(t, byID["d1"]["first"].(map[string]any)["text"], `{"fail":"permanent"}`, "from its dead letter")
			require.Contains(t, byID["d1"]["second"].(map[string]any)["text"], `{"fail":"no"}`)
		})
	}
}

// GET /v1/admin/collisions lists the oldest ?limit= collisions and says
// when more are parked; a bad limit is a 400 naming it.
func TestAdminCollisionsSayWhenMoreAreParked(t *testing.T) {
	r := start(t, Options{})
	for i, id := range []string{"c1", "c2"} {
		r.post(t, ev(id, "", 0, `{"amount":10}`))
		eventually(t, id+" applied", func() bool { return r.effects(t) == int64(i+1) })
		r.postWant(t, ev(id, "", 0, `{"amount":99}`), http.StatusConflict)
	}
	eventually(t, "two collisions", func() bool {
		return len(list(t, r.admin(t, "GET", "/v1/admin/collisions", "", 200), "collisions")) == 2
	})
	all := r.admin(t, "GET", "/v1/admin/collisions", "", 200)
	require.Equal(t, false, all["more"])
	one := r.admin(t, "GET", "/v1/admin/collisions?limit=1", "", 200)
	require.Equal(t, true, one["more"])
	cs := list(t, one, "collisions")
	require.Len(t, cs, 1)
	require.Equal(t, "c1", cs[0]["id"], "the oldest")
	for _, bad := range []string{"0", "10001", "x"} {
		require.Equal(t, "limit", r.admin(t, "GET", "/v1/admin/collisions?limit="+bad, "", 400)["field"], bad)
	}
}

// The OpenAPI document is valid JSON and lists every admin route.
func TestOpenAPIListsTheRoutes(t *testing.T) {
	r := start(t, Options{})
	code, doc, _ := r.call(t, "GET", "/v1/openapi.json", "", nil, "")
	require.Equal(t, 200, code)
	paths := doc["paths"].(map[string]any)
	for _, p := range []string{"/v1/events", "/v1/admin/keys", "/v1/admin/keys/{key}", "/v1/admin/keys/{key}/release",
		"/v1/admin/dlq", "/v1/admin/dlq/{seq}", "/v1/admin/dlq/{seq}/redrive", "/v1/admin/dlq/{seq}/skip",
		"/v1/admin/collisions", "/v1/admin/audit", "/v1/admin/retention", "/v1/admin/overview", "/metrics", "/healthz", "/readyz"} {
		require.Contains(t, paths, p)
	}
	code, _, h := r.call(t, "GET", "/ui/", "", nil, "")
	require.Equal(t, 200, code)
	require.Contains(t, h.Get("Content-Security-Policy"), "default-src 'none'")
}

// A non-loopback address needs an admin token.
func TestNonLoopbackNeedsAToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "192.168.1.4:80", "[::]:8080", "example.com:80"} {
		require.ErrorIs(t, CheckAddr(addr, false), ErrNonLoopbackWithoutToken, addr)
		require.NoError(t, CheckAddr(addr, true), addr)
	}
	for _, addr := range []string{"127.0.0.1:8080", "[::1]:8080", "localhost:0", "127.9.9.9:1"} {
		require.NoError(t, CheckAddr(addr, false), addr)
	}
	require.Error(t, Options{Addr: "nope"}.Validate())
}

// A hold that turns into a block keeps one "since": the key's since (and
// age) is when the held message was parked, and the overview's oldest
// stuck is that same time, although the block came a hold timeout later.
func TestAdminSinceSurvivesAHoldTurningIntoABlock(t *testing.T) {
	r := start(t, Options{Policy: seqbox.Config{Policies: seqbox.Policies{HoldTimeout: 300 * time.Millisecond}}})
	r.post(t, ev("g1", "G", 1, ""))
	r.post(t, ev("g3", "G", 3, ""))
	eventually(t, "G blocked by the expired hold", func() bool {
		keys := list(t, r.admin(t, "GET", "/v1/admin/keys", "", 200), "keys")
		return len(keys) == 1 && keys[0]["status"] == "blocked"
	})
	key := r.admin(t, "GET", "/v1/admin/keys/G", "", 200)
	parked := list(t, key, "parked")
	require.Len(t, parked, 1)
	require.Equal(t, parked[0]["parked_at"], key["since"], "since is when the hold began")
	keys := list(t, r.admin(t, "GET", "/v1/admin/keys", "", 200), "keys")
	require.Len(t, keys, 1)
	require.Equal(t, key["since"], keys[0]["since"])
	require.Equal(t, []any{map[string]any{"name": "release", "method": "POST", "path": "/v1/admin/keys/G/release"}}, keys[0]["actions"])
	o := r.admin(t, "GET", "/v1/admin/overview", "", 200)
	require.Equal(t, key["since"], o["counts"].(map[string]any)["oldest_stuck"])

	// /metrics ages the same time.
	since, err := time.Parse(time.RFC3339Nano, key["since"].(string))
	require.NoError(t, err)
	before := time.Now()
	age := r.metricValue(t, `seqbox_oldest_stuck_age_seconds{consumer="gateway"}`)
	after := time.Now()
	aged := time.Duration(age * float64(time.Second))
	require.WithinRange(t, since, before.Add(-aged-time.Millisecond), after.Add(-aged+time.Millisecond),
		"seqbox_oldest_stuck_age_seconds %v counts from G's since", age)
}

// Events refused at ingest (400) are counted in the overview next to the
// consumer's outcomes, as /metrics counts them.
func TestAdminOverviewCountsIngestRejections(t *testing.T) {
	r := start(t, Options{})
	require.EqualValues(t, 0, r.admin(t, "GET", "/v1/admin/overview", "", 200)["rejected_at_ingest"])
	code, _, _ := r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaStructured}, `{"specversion":"1.0","id":"x"}`)
	require.Equal(t, http.StatusBadRequest, code)
	batch := "[" + ev("ok", "K", 1, "") + `,{"specversion":"1.0"},{"id":"y"}]`
	code, _, _ = r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaBatch}, batch)
	require.Equal(t, http.StatusBadRequest, code)
	o := r.admin(t, "GET", "/v1/admin/overview", "", 200)
	require.EqualValues(t, 3, o["rejected_at_ingest"], "one structured, two of the batch")
	require.EqualValues(t, 1, r.metricValue(t, `seqbox_gateway_invalid_events_total{consumer="gateway",mode="structured"}`))
	require.EqualValues(t, 2, r.metricValue(t, `seqbox_gateway_invalid_events_total{consumer="gateway",mode="batch"}`))
	require.EqualValues(t, 0, o["outcomes"].(map[string]any)["rejected"], "nothing reached the consumer")
	_, err := time.Parse(time.RFC3339Nano, o["now"].(string))
	require.NoError(t, err)
}

// A dead letter redriven three times, failing each time, keeps its
// number: each redrive names it, its attempts add up, and its history
// has a line per failed redrive.
func TestAdminRedriveFailingAgainKeepsTheNumber(t *testing.T) {
	r := start(t, Options{})
	seq := blockKey(t, r, "K")
	first := r.admin(t, "GET", "/v1/admin/dlq/"+itoa(seq), "", 200)
	for i := 1; i <= 3; i++ {
		res := r.admin(t, "POST", "/v1/admin/dlq/"+itoa(seq)+"/redrive", `{"by":"alice","reason":"try again"}`, 200)
		require.Equal(t, "dead_lettered", list(t, res, "results")[0]["outcome"])
		require.Equal(t, float64(seq), res["dead_letter"], "redrive %d", i)
	}
	dls := list(t, r.admin(t, "GET", "/v1/admin/dlq", "", 200), "dead_letters")
	require.Len(t, dls, 1)
	require.Equal(t, float64(seq), dls[0]["seq"])
	dl := r.admin(t, "GET", "/v1/admin/dlq/"+itoa(seq), "", 200)
	require.Equal(t, []any{"open", 3.0, first["attempts"].(float64) + 3}, []any{dl["state"], dl["redrives"], dl["attempts"]})
	require.Len(t, dl["history"], 3)
	all := list(t, r.admin(t, "GET", "/v1/admin/dlq?all=true", "", 200), "dead_letters")
	require.Len(t, all, 1, "no other row was made")
}

// The admin API reads a flag and a path number one way everywhere: before,
// dlq?all=maybe listed the open letters (200) where keys?all=maybe was
// refused, and requests/0 answered 404 where dlq/0 answered 400.
func TestAdminReadsFlagsAndPathNumbersOneWay(t *testing.T) {
	r := start(t, Options{})
	for _, path := range []string{"/v1/admin/keys?all=maybe", "/v1/admin/dlq?all=maybe", "/v1/admin/dlq?all=1"} {
		body := r.admin(t, "GET", path, "", 400)
		require.Equal(t, "all", body["field"], path)
		require.Contains(t, body["detail"], "is not true or false", path)
	}
	for _, path := range []string{"/v1/admin/dlq?all=true", "/v1/admin/dlq?all=false", "/v1/admin/keys?all=true"} {
		r.admin(t, "GET", path, "", 200)
	}
	for _, c := range []struct{ method, path, what string }{
		{"GET", "/v1/admin/dlq/0", "a DLQ sequence number"},
		{"GET", "/v1/admin/dlq/-3", "a DLQ sequence number"},
		{"GET", "/v1/admin/dlq/x", "a DLQ sequence number"},
		{"POST", "/v1/admin/dlq/0/redrive", "a DLQ sequence number"},
		{"GET", "/v1/admin/requests/0", "a request number"},
		{"GET", "/v1/admin/requests/-1", "a request number"},
		{"GET", "/v1/admin/requests/x", "a request number"},
	} {
		body := r.admin(t, c.method, c.path, `{"by":"a","reason":"b"}`, 400)
		require.Equal(t, "seq", body["field"], c.path)
		require.Contains(t, body["detail"], "is not "+c.what+" (a positive integer)", c.path)
	}
	r.admin(t, "GET", "/v1/admin/requests/99", "", 404)
	r.admin(t, "GET", "/v1/admin/dlq/99", "", 404)
}

// A path segment that is exactly "/" (a key "/", an event's source "/":
// a CloudEvents source is a URI-reference) reaches its route, escaped as
// %2F: http.ServeMux finds no route for such a segment, though it routes
// "a%2Fb", and the key could be neither shown nor released.
func TestAKeyNamedSlashIsReachable(t *testing.T) {
	r := start(t, Options{DB: filepath.Join(t.TempDir(), "slash.db")})
	blockKey(t, r, "/")
	key := r.admin(t, "GET", "/v1/admin/keys/%2F", "", 200)
	require.Equal(t, "/", key["partitionkey"])
	require.Len(t, list(t, key, "parked"), 1)
	r.admin(t, "GET", "/v1/admin/keys/%2f", "", 200) // either case of the escape
	res := r.admin(t, "POST", "/v1/admin/keys/%2F/release", `{"by":"carol","reason":"a slash"}`, 409)
	require.NotContains(t, res["detail"], "no such path", "the route answered")
	r.admin(t, "GET", "/v1/admin/inbox/%2F/nope", "", 404)
	body := r.admin(t, "GET", "/v1/admin/inbox/%2F/nope", "", 404)
	require.NotContains(t, body["detail"], "no such path", "the route answered")
	// A path that needs cleaning is the mux's to redirect, to the same
	// segment: never to the spelling the route was looked up with.
	req, err := http.NewRequest("POST", r.url+"/v1/events/%2F/x/steps/n/.", nil)
	require.NoError(t, err)
	req.URL.RawPath, req.URL.Path = "/v1/events/%2F/x/steps/n/.", "/v1/events///x/steps/n/."
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.NotContains(t, resp.Header.Get("Location"), "_", "the probe's spelling leaked into a redirect: %s", resp.Status)
}
