package serve

import (
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
