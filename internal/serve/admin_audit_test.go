package serve

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// auditRows is GET path's audit rows, as outcome/id/received/met strings.
func auditRows(t *testing.T, r *running, path string) ([]string, map[string]any) {
	t.Helper()
	body := r.admin(t, "GET", path, "", 200)
	var out []string
	for _, a := range list(t, body, "audit") {
		out = append(out, a["outcome"].(string)+" "+a["id"].(string)+" "+jv(a["received_version"])+"→"+jv(a["current_version"]))
	}
	return out, body
}

// jv prints a JSON number or null.
func jv(x any) string {
	if x == nil {
		return "-"
	}
	return itoa(int64(x.(float64)))
}

// outcomesSetup: order-1 at version 2 met three stale copies of version 1
// (s1, s2, s3), order-10 holds version 3 for the missing 2, and c1
// collided at ingest.
func outcomesSetup(t *testing.T, r *running) {
	t.Helper()
	r.post(t, ev("o1", "order-1", 1, `{"n":1}`))
	r.post(t, ev("o2", "order-1", 2, `{"n":2}`))
	r.post(t, ev("p1", "order-10", 1, `{"n":1}`))
	r.post(t, ev("c1", "C", 1, `{"n":1}`))
	at := func(key string, version float64) bool {
		code, k, _ := r.call(t, "GET", "/v1/admin/keys/"+key, testToken, nil, "")
		return code == 200 && k["version"] == version
	}
	eventually(t, "order-1 at version 2, order-10 at 1", func() bool { return at("order-1", 2) && at("order-10", 1) })
	rowsAre := func(n int) func() bool {
		return func() bool {
			rows, _ := auditRows(t, r, "/v1/admin/audit")
			return len(rows) == n
		}
	}
	for i, id := range []string{"s1", "s2", "s3"} {
		r.post(t, ev(id, "order-1", 1, `{"n":"late `+id+`"}`))
		eventually(t, id+" stale", rowsAre(i+1))
	}
	r.post(t, ev("p3", "order-10", 3, `{"n":3}`))
	eventually(t, "p3 held", rowsAre(4))
	r.postWant(t, ev("c1", "C", 1, `{"n":2}`), 409)
	eventually(t, "c1's collision", rowsAre(5))
}

// GET /v1/admin/audit without object or id lists the most recent
// outcomes of every object, newest last, each with its reason and the
// version it met; filtered by outcome (one or several) and a search, a
// page at a time (next_before), every bad parameter a 400 naming it.
func TestAdminAuditFilterAndPages(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := start(t, Options{DB: db(t)})
			outcomesSetup(t, r)

			rows, body := auditRows(t, r, "/v1/admin/audit")
			require.Equal(t, []string{"stale s1 1→2", "stale s2 1→2", "stale s3 1→2", "held p3 3→1", "collision c1 1→-"}, rows)
			require.Nil(t, body["next_before"])
			require.Equal(t, true, body["scan_complete"])
			require.EqualValues(t, 5, body["scanned"])
			for _, a := range list(t, body, "audit") {
				require.NotEmpty(t, a["reason"], "every row says why")
			}

			rows, _ = auditRows(t, r, "/v1/admin/audit?outcome=stale")
			require.Equal(t, []string{"stale s1 1→2", "stale s2 1→2", "stale s3 1→2"}, rows)
			rows, _ = auditRows(t, r, "/v1/admin/audit?outcome=stale,collision")
			require.Len(t, rows, 4)

			// Pages: the newest two, then the one before them.
			rows, body = auditRows(t, r, "/v1/admin/audit?outcome=stale&limit=2")
			require.Equal(t, []string{"stale s2 1→2", "stale s3 1→2"}, rows)
			first := list(t, body, "audit")[0]
			require.Equal(t, first["seq"], body["next_before"], "the next page is older than this one's oldest row")
			rows, body = auditRows(t, r, "/v1/admin/audit?outcome=stale&limit=2&before="+jv(body["next_before"]))
			require.Equal(t, []string{"stale s1 1→2"}, rows)
			require.Nil(t, body["next_before"])

			// A search, case-insensitive, over key, identity and reason.
			rows, _ = auditRows(t, r, "/v1/admin/audit?q=ORDER-10")
			require.Equal(t, []string{"held p3 3→1"}, rows)
			rows, _ = auditRows(t, r, "/v1/admin/audit?q="+url.QueryEscape("s2"))
			require.Equal(t, []string{"stale s2 1→2"}, rows)
			rows, _ = auditRows(t, r, "/v1/admin/audit?object=order-1&outcome=stale&limit=1")
			require.Equal(t, []string{"stale s3 1→2"}, rows)
			rows, body = auditRows(t, r, "/v1/admin/audit?id=s1")
			require.Equal(t, []string{"stale s1 1→2"}, rows)
			require.Len(t, list(t, body, "identities"), 1)

			for _, c := range []struct{ query, field string }{
				{"outcome=nope", "outcome"}, {"outcome=stale,nope", "outcome"}, {"outcome=applied", "outcome"},
				{"outcome=duplicate", "outcome"}, {"limit=0", "limit"}, {"limit=abc", "limit"}, {"limit=10001", "limit"},
				{"before=0", "before"}, {"before=x", "before"}, {"q=" + strings.Repeat("x", 257), "q"},
				{"object=order-1&id=s1", "object"},
			} {
				p := r.admin(t, "GET", "/v1/admin/audit?"+c.query, "", 400)
				require.Equal(t, c.field, p["field"], c.query)
				require.True(t, strings.HasPrefix(p["detail"].(string), c.field+": "), "%s: %s", c.query, p["detail"])
			}
		})
	}
}

// keysFound is GET /v1/admin/keys?query's keys, as "key status", and its
// total.
func keysFound(t *testing.T, r *running, query string) ([]string, any) {
	t.Helper()
	body := r.admin(t, "GET", "/v1/admin/keys?"+query, "", 200)
	var out []string
	for _, k := range list(t, body, "keys") {
		out = append(out, k["partitionkey"].(string)+" "+k["status"].(string))
	}
	return out, body["total"]
}

// GET /v1/admin/keys?search= finds any key whose name holds the string,
// stuck or not with all=true, the exact match first; limit keeps the
// first, total counts them all; bad parameters are 400s naming them.
func TestAdminKeysSearch(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := start(t, Options{DB: db(t)})
			outcomesSetup(t, r)
			keys := func(query string) ([]string, any) { return keysFound(t, r, query) }
			got, total := keys("all=true&search=ORDER-1")
			require.Equal(t, []string{"order-1 ok", "order-10 held"}, got, "the exact match first, then oldest stuck first")
			require.EqualValues(t, 2, total)
			got, _ = keys("search=order-1")
			require.Equal(t, []string{"order-10 held"}, got, "without all=true: the stuck keys only")
			got, total = keys("all=true&search=order&limit=1")
			require.Equal(t, []string{"order-10 held"}, got)
			require.EqualValues(t, 2, total)
			got, total = keys("all=true&search=nothing-like-it")
			require.Empty(t, got)
			require.EqualValues(t, 0, total)
			for _, c := range []struct{ query, field string }{
				{"all=yes", "all"}, {"limit=0", "limit"}, {"limit=x", "limit"}, {"search=" + strings.Repeat("k", 257), "search"},
			} {
				require.Equal(t, c.field, r.admin(t, "GET", "/v1/admin/keys?"+c.query, "", 400)["field"], c.query)
			}
		})
	}
}

// A search of every key with a limit (the console's) reports only the
// page's keys, and answers what the full listing answers, cut at the
// limit: the same keys in the same order (exact matches first, then the
// keys held longest, then the rest by key), with the same total.
func TestAdminKeysSearchPageIsTheFullListingCut(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := start(t, Options{DB: db(t)})
			outcomesSetup(t, r)
			for i, key := range []string{"ORDER-1", "order-2", "quiet-order", "Order-3"} {
				r.post(t, ev(fmt.Sprintf("q%d", i), key, 1, `{"n":1}`))
			}
			r.post(t, ev("h2", "order-2", 3, `{"n":3}`)) // held, later than order-10's p3
			eventually(t, "order-2 held and Order-3 applied", func() bool {
				_, k, _ := r.call(t, "GET", "/v1/admin/keys/order-2", testToken, nil, "")
				// Not found until its event is applied: polled, not
				// required.
				_, o, _ := r.call(t, "GET", "/v1/admin/keys/Order-3", testToken, nil, "")
				return k["status"] == "held" && o["version"] == float64(1)
			})
			page := func(query string) ([]string, any) { return keysFound(t, r, query) }
			for _, search := range []string{"", "order", "ORDER-1", "order-1", "o", "C", "nothing"} {
				q := "all=true&search=" + url.QueryEscape(search)
				full, total := page(q)
				cut, cutTotal := page(q + "&limit=10000")
				require.Equal(t, full, cut, "search %q", search)
				require.Equal(t, total, cutTotal, "search %q", search)
				two, twoTotal := page(q + "&limit=2")
				require.Equal(t, full[:min(2, len(full))], two, "search %q", search)
				require.Equal(t, total, twoTotal, "search %q", search)
			}
			got, _ := page("all=true&search=order&limit=10000")
			require.Equal(t, []string{"order-10 held", "order-2 held", "ORDER-1 ok", "Order-3 ok", "order-1 ok", "quiet-order ok"}, got,
				"held longest first, then the rest by key (bytes)")
			got, _ = page("all=true&search=order-1&limit=2")
			require.Equal(t, []string{"ORDER-1 ok", "order-1 ok"}, got, "both exact matches first, in key order")
		})
	}
}
