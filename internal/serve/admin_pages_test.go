package serve

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// GET /v1/admin/dlq pages with ?limit and ?after: before, it drew every
// dead letter in one answer (1,008 rows made the console's overview
// 800,000 pixels tall). A page holds limit rows in the order they died,
// next_after names the next page's start, the last page has none, and
// ?all=true pages over the resolved rows too.
func TestAdminDeadLettersComeAPageAtATime(t *testing.T) {
	r := start(t, Options{})
	for _, key := range []string{"A", "B", "C", "D", "E"} {
		r.post(t, ev(key+"-1", key, 1, `{"fail":"permanent"}`))
	}
	var seqs []float64
	eventually(t, "five dead letters", func() bool {
		seqs = seqs[:0]
		for _, d := range list(t, r.admin(t, "GET", "/v1/admin/dlq", "", 200), "dead_letters") {
			seqs = append(seqs, d["seq"].(float64))
		}
		return len(seqs) == 5
	})
	r.admin(t, "POST", "/v1/admin/dlq/"+itoa(int64(seqs[1]))+"/skip", `{"by":"ana","reason":"obsolete"}`, 200)

	pageOf := func(path string) ([]float64, any) {
		body := r.admin(t, "GET", path, "", 200)
		var got []float64
		for _, d := range list(t, body, "dead_letters") {
			got = append(got, d["seq"].(float64))
		}
		return got, body["next_after"]
	}
	got, next := pageOf("/v1/admin/dlq?limit=2")
	require.Equal(t, []float64{seqs[0], seqs[2]}, got, "open ones, the skipped one left out")
	require.Equal(t, seqs[2], next)
	got, next = pageOf("/v1/admin/dlq?limit=2&after=" + itoa(int64(seqs[2])))
	require.Equal(t, []float64{seqs[3], seqs[4]}, got)
	require.Nil(t, next, "a page that ends the list names no next one")
	got, next = pageOf("/v1/admin/dlq?all=true&limit=4")
	require.Equal(t, seqs[:4], got)
	require.Equal(t, seqs[3], next)
	got, next = pageOf("/v1/admin/dlq?all=true&limit=4&after=" + itoa(int64(seqs[3])))
	require.Equal(t, seqs[4:], got)
	require.Nil(t, next)
	got, next = pageOf("/v1/admin/dlq?after=" + itoa(int64(seqs[4])))
	require.Empty(t, got)
	require.Nil(t, next)
	got, next = pageOf("/v1/admin/dlq")
	require.Equal(t, []float64{seqs[0], seqs[2], seqs[3], seqs[4]}, got, "no limit: every open one")
	require.Nil(t, next)

	for _, bad := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=10001", "limit"}, {"limit=x", "limit"},
		{"after=-1", "after"}, {"after=1.5", "after"}, {"all=yes", "all"},
	} {
		body := r.admin(t, "GET", "/v1/admin/dlq?"+bad.query, "", 400)
		require.Equal(t, bad.field, body["field"], bad.query)
	}
}

// GET /v1/admin/keys/{key} answers a page of the key's parked messages,
// the lowest versions first: ?parked_limit= of them (100 unless set),
// from after ?parked_after= (the last page's parked_next), with
// parked_total; bad values are 400s naming the parameter.
func TestAdminKeyParkedComeAPageAtATime(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := start(t, Options{DB: db(t)})
			blockKey(t, r, "K")
			for v := 3; v <= 6; v++ {
				r.post(t, ev("K-"+itoa(int64(v)), "K", v, `{"n":1}`))
			}
			eventually(t, "five parked behind K", func() bool {
				return r.admin(t, "GET", "/v1/admin/keys/K", "", 200)["parked_total"] == float64(5)
			})
			whole := r.admin(t, "GET", "/v1/admin/keys/K", "", 200)
			require.Nil(t, whole["parked_next"], "all five fit the default page")
			var want []any
			for _, p := range list(t, whole, "parked") {
				want = append(want, p["id"])
			}
			require.Equal(t, []any{"K-2", "K-3", "K-4", "K-5", "K-6"}, want)

			var got []any
			after := ""
			for pages := 0; ; pages++ {
				require.Less(t, pages, 3, "three pages of two hold five")
				page := r.admin(t, "GET", "/v1/admin/keys/K?parked_limit=2"+after, "", 200)
				require.EqualValues(t, 5, page["parked_total"])
				for _, p := range list(t, page, "parked") {
					got = append(got, p["id"])
				}
				next, more := page["parked_next"].(string)
				if !more {
					break
				}
				after = "&parked_after=" + url.QueryEscape(next)
			}
			require.Equal(t, want, got, "the pages, in order, hold every parked message once")
			for _, bad := range []struct{ query, field string }{
				{"parked_limit=0", "parked_limit"}, {"parked_limit=10001", "parked_limit"}, {"parked_limit=x", "parked_limit"},
				{"parked_after=3", "parked_after"}, {"parked_after=x:1", "parked_after"}, {"parked_after=-2:1", "parked_after"},
				{"parked_after=1:0", "parked_after"},
			} {
				require.Equal(t, bad.field, r.admin(t, "GET", "/v1/admin/keys/K?"+bad.query, "", 400)["field"], bad.query)
			}
		})
	}
}
