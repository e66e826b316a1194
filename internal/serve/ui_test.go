package serve

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
)

// dashboardSetup is a gateway with an agent and, once it returns, the
// states the dashboard shows: key G blocked by a hold that expired (a
// gap), keys K and S blocked behind dead letters (the agent refuses their
// version 1) with version 2 parked behind each, a collision on c1, and
// three events refused at ingest.
type dashboardSetup struct {
	*running
	// brokenK makes the agent refuse K's version 1; S's always fails.
	brokenK atomic.Bool
}

func newDashboardSetup(t *testing.T) *dashboardSetup {
	d := &dashboardSetup{}
	d.brokenK.Store(true)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, version := r.Header.Get("Seqbox-Partition-Key"), r.Header.Get("Seqbox-Object-Version")
		if version == "1" && (key == "S" || (key == "K" && d.brokenK.Load())) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"title":"unknown customer","status":422}`))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(agent.Close)
	d.running = start(t, Options{AgentURL: agent.URL, Policy: seqbox.Config{Policies: seqbox.Policies{HoldTimeout: 300 * time.Millisecond}}})

	d.post(t, ev("g1", "G", 1, `{"status":"created"}`))
	d.post(t, ev("g3", "G", 3, `{"status":"shipped"}`))
	d.waitKeys(t, "G blocked by its expired hold", func(keys map[string]map[string]any) bool {
		return keys["G"]["status"] == "blocked"
	})
	for _, key := range []string{"K", "S"} {
		d.post(t, ev(key+"-1", key, 1, `{"status":"created"}`))
		d.post(t, ev(key+"-2", key, 2, `{"status":"paid"}`))
	}
	d.post(t, ev("c1", "C", 1, `{"amount":10,"currency":"EUR","customer":{"id":"k-1","tier":"gold"},"note":"first"}`))
	d.waitKeys(t, "K and S blocked behind dead letters, c1 applied", func(keys map[string]map[string]any) bool {
		return keys["K"]["blocked_messages"] == float64(1) && keys["S"]["blocked_messages"] == float64(1) && d.outcome(t, "c1") == "applied"
	})
	d.postWant(t, ev("c1", "C", 1, `{"amount":99,"currency":"EUR","customer":{"id":"k-1","tier":"silver","vip":true}}`), http.StatusConflict)
	eventually(t, "the collision", func() bool {
		return len(list(t, d.admin(t, "GET", "/v1/admin/collisions", "", 200), "collisions")) == 1
	})
	code, _, _ := d.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaStructured}, `{"specversion":"1.0","id":"bad"}`)
	require.Equal(t, http.StatusBadRequest, code)
	code, _, _ = d.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaBatch}, `[{"specversion":"1.0"},{"id":"x"}]`)
	require.Equal(t, http.StatusBadRequest, code)
	return d
}

// waitKeys polls the stuck keys (by partition key) until cond holds.
func (d *dashboardSetup) waitKeys(t *testing.T, what string, cond func(map[string]map[string]any) bool) {
	t.Helper()
	eventually(t, what, func() bool {
		return cond(d.stuckKeys(t))
	})
}

func (d *dashboardSetup) stuckKeys(t *testing.T) map[string]map[string]any {
	t.Helper()
	m := map[string]map[string]any{}
	for _, k := range list(t, d.admin(t, "GET", "/v1/admin/keys", "", 200), "keys") {
		m[k["partitionkey"].(string)] = k
	}
	return m
}

// outcome is the inbox outcome of event id ("" when none).
func (d *dashboardSetup) outcome(t *testing.T, id string) string {
	t.Helper()
	ids := list(t, d.admin(t, "GET", "/v1/admin/audit?source=crm&id="+id, "", 200), "identities")
	if len(ids) == 0 {
		return ""
	}
	return ids[0]["inbox_outcome"].(string)
}

// openDLQ maps the open dead letters' event ids to their seq.
func (d *dashboardSetup) openDLQ(t *testing.T) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	for _, dl := range list(t, d.admin(t, "GET", "/v1/admin/dlq", "", 200), "dead_letters") {
		m[dl["id"].(string)] = int64(dl["seq"].(float64))
	}
	return m
}

// requestOf reads the operator request a status line names.
func (d *dashboardSetup) requestOf(t *testing.T, status string) map[string]any {
	t.Helper()
	m := regexp.MustCompile(`^request (\d+): `).FindStringSubmatch(status)
	require.NotNil(t, m, "status %q names no request", status)
	return d.admin(t, "GET", "/v1/admin/requests/"+m[1], "", 200)
}

// login opens the dashboard and enters the admin token.
func login(b *browser, url string) {
	b.do("open the dashboard", chromedp.Navigate(url+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	login := b.text(`#login-panel`)
	for _, s := range []string{"--admin-token", "SEQBOX_ADMIN_TOKEN", "sessionStorage", "Authorization: Bearer"} {
		require.Contains(b.t, login, s, "the login panel explains where the token comes from and where it is kept")
	}
	b.shot("1-login")
	b.do("enter the token", chromedp.SendKeys(chromedp.CSS(`#token`), testToken), chromedp.Click(chromedp.CSS(`#login-button`)),
		chromedp.WaitVisible(chromedp.CSS(`#app`)))
	require.Equal(b.t, testToken, eval[string](b, `sessionStorage.getItem("seqbox.adminToken")`))
}

// act clicks an action button, answers the dialog with who and why, and
// returns the status line once it is of kind ("ok" or "bad") and says
// want.
func act(b *browser, button, by, reason, kind, want string) string {
	b.t.Helper()
	b.do("open the dialog of "+button, chromedp.Click(chromedp.CSS(button)), chromedp.WaitVisible(chromedp.CSS(`#action-dialog`)))
	b.do("answer who and why", fill(`#action-by`, by), fill(`#action-reason`, reason))
	b.do("confirm", chromedp.Click(chromedp.CSS(`#action-confirm`)))
	return b.status(kind, want)
}

// status waits for the status line to be of kind and say want, and
// returns it.
func (b *browser) status(kind, want string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.PollFunction[string](`(kind, want) => {
		const s = document.querySelector("#status");
		return s.classList.contains("status-" + kind) && s.textContent.includes(want) ? s.textContent : false;
	}`, chromedp.WithPollingArgs(kind, want), chromedp.WithPollingMutation()))
	if err != nil {
		st, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("#status").className + ": " + document.querySelector("#status").textContent`))
		b.t.Fatalf("waiting for a %s status saying %q: %v; the status is %q", kind, want, err, st)
	}
	return s
}

// The dashboard end to end in Chromium: it explains the token and keeps
// it in the tab; the tiles show what the API counts (ingest rejections
// included); times are relative with the exact time on hover; the chart
// has a time axis and a value axis; the collision's differing fields are
// marked; and the release, redrive and skip buttons each ask who and why,
// act through the API, and say success as success and failure as failure.
func TestDashboardInBrowser(t *testing.T) {
	b := newBrowser(t)
	d := newDashboardSetup(t)
	login(b, d.url)
	type css = chromedp.CSS
	// A key named "." or ".." is fetched as %2E, not as a directory.
	require.Equal(t, []string{"%2E", "%2E%2E", "a%2Fb", "..."}, eval[[]string](b, `[".", "..", "a/b", "..."].map(seg)`))
	row := func(key string) string { return `#stuck-keys tbody tr[data-key="` + key + `"]` }
	b.do("the stuck keys, the DLQ and the collision", chromedp.WaitVisible(css(row("G"))), chromedp.WaitVisible(css(row("K"))),
		chromedp.WaitVisible(css(row("S"))), chromedp.WaitVisible(css(`#dlq tbody tr`)), chromedp.WaitVisible(css(`.collision .diff-summary`)))

	// The tiles show what the API counts.
	o := d.admin(t, "GET", "/v1/admin/overview", "", 200)
	counts := o["counts"].(map[string]any)
	require.EqualValues(t, 3, o["rejected_at_ingest"])
	tile := func(id string) string { return b.text(`[data-tile="` + id + `"] .v`) }
	require.Equal(t, "3", tile("rejected"), "one structured and two batched events answered 400")
	require.Contains(t, b.attr(`[data-tile="rejected"]`, "title"), "refused with 400 by POST /v1/events")
	require.Equal(t, strconv.Itoa(int(counts["blocked_keys"].(float64))), tile("blocked"))
	require.Equal(t, "3", tile("blocked"))
	require.Equal(t, "2", tile("dlq"))
	require.Equal(t, "1", tile("collisions"))

	// One since per key, relative, exact on hover; the oldest stuck tile
	// is G's, which blocked when its hold expired.
	keys := d.stuckKeys(t)
	since := keys["G"]["since"].(string)
	require.Equal(t, counts["oldest_stuck"], since, "the overview's oldest stuck is G's since")
	require.Regexp(t, `^(just now|\d+ s ago|\d+ min ago)$`, b.text(row("G")+` td.since time`))
	require.True(t, strings.HasPrefix(b.attr(row("G")+` td.since time`, "title"), since+" ("), "the exact time on hover")
	require.True(t, strings.HasPrefix(b.attr(`[data-tile="oldest"] .v time`, "title"), since+" ("))

	// The chart's axes: clock times on each whole minute of the last ten,
	// and a value axis from 0.
	ticks := eval[[]string](b, `[...document.querySelectorAll("#chart .axis-x text[data-start]")].map((e) => e.dataset.start)`)
	require.GreaterOrEqual(t, len(ticks), 9)
	for _, s := range ticks {
		at, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		require.Zero(t, at.Second(), "a time tick on a whole minute: %s", s)
	}
	require.Equal(t, "0", b.text(`#chart .axis-y text`))
	require.Contains(t, b.text(`#chart .axis-y .axis-title`), "results per 5 s")

	// The collision's differing fields, marked on each side.
	c := `.collision[data-id="c1"] `
	diff := list(t, list(t, d.admin(t, "GET", "/v1/admin/collisions", "", 200), "collisions")[0], "diff")
	require.Len(t, diff, 4, "%v", diff)
	require.Equal(t, []string{"data.amount changed", "data.customer.tier changed", "data.customer.vip added", "data.note removed"},
		eval[[]string](b, `[...document.querySelectorAll('`+c+`.diff-summary tbody tr')].map((r) => r.dataset.path + " " + r.dataset.change)`))
	for _, m := range []string{`.json.first .diff-changed[data-path="data.amount"]`, `.json.second .diff-changed[data-path="data.amount"]`,
		`.json.second .diff-changed[data-path="data.customer.tier"]`, `.json.second .diff-added[data-path="data.customer.vip"]`,
		`.json.first .diff-removed[data-path="data.note"]`} {
		b.do("the mark "+m, chromedp.WaitVisible(css(c+m)))
	}
	require.Equal(t, "jl", b.attr(c+`.json.second [data-path="data.currency"]`, "class"), "an equal field is not marked")
	b.shot("2-stuck-keys")
	b.shotOf("3-collision-diff", c)

	// Redrive K while the agent still refuses it: a failure, naming its
	// dead letter, which keeps its number.
	dls := d.openDLQ(t)
	status := act(b, row("K")+` button.redrive`, "alice", "agent deployed", "bad", "redrive of dead letter "+itoa(dls["K-1"]))
	again := d.openDLQ(t)["K-1"]
	require.Equal(t, dls["K-1"], again, "a dead letter keeps its number across a failed redrive")
	require.Contains(t, status, "redrive of dead letter "+itoa(dls["K-1"])+" ran, but the message failed again and is dead-lettered (still dead letter "+itoa(again)+")")
	dl := d.admin(t, "GET", "/v1/admin/dlq/"+itoa(again), "", 200)
	require.Equal(t, []any{"open", 1.0}, []any{dl["state"], dl["redrives"]}, "the dead letter stays open, one failed redrive on its history")
	b.do("the dead letter still listed", chromedp.WaitVisible(css(`#dlq tbody tr[data-seq="`+itoa(again)+`"]`)))
	b.shot("4-redrive-failed-again")

	// Fixed: redrive it from the DLQ table; who is remembered.
	d.brokenK.Store(false)
	b.do("open the redrive", chromedp.Click(css(`#dlq tbody tr[data-seq="`+itoa(again)+`"] button.redrive`)), chromedp.WaitVisible(css(`#action-dialog`)))
	require.Equal(t, "alice", eval[string](b, `document.querySelector("#action-by").value`))
	b.do("cancel", chromedp.Click(css(`#action-cancel`)), chromedp.WaitNotVisible(css(`#action-dialog`)))
	status = act(b, `#dlq tbody tr[data-seq="`+itoa(again)+`"] button.redrive`, "alice", "agent fixed for real", "ok", "redrive of dead letter "+itoa(again))
	require.Contains(t, status, "redrive of dead letter "+itoa(again)+" done (applied, applied), by alice")
	req := d.requestOf(t, status)
	require.Equal(t, "redrive", req["action"])
	require.Equal(t, "alice", req["by"])
	require.Equal(t, "agent fixed for real", req["reason"])
	require.Equal(t, "applied", d.outcome(t, "K-1"))
	require.Equal(t, "applied", d.outcome(t, "K-2"))
	b.do("K leaves the stuck keys", chromedp.WaitNotPresent(css(row("K"))))
	require.Equal(t, "#067647", eval[string](b, `(() => { const c = getComputedStyle(document.querySelector("#status")).color.match(/\d+/g).map(Number); return "#" + c.slice(0, 3).map((n) => n.toString(16).padStart(2, "0")).join(""); })()`),
		"success is shown in green")

	// Skip S: why is required, on the page as by the API.
	b.do("open the skip", chromedp.Click(css(row("S")+` button.skip`)), chromedp.WaitVisible(css(`#action-dialog`)))
	b.do("confirm without why", fill(`#action-by`, "bob"), chromedp.Click(css(`#action-confirm`)))
	require.Contains(t, b.text(`#action-error`), "why")
	b.do("cancel", chromedp.Click(css(`#action-cancel`)), chromedp.WaitNotVisible(css(`#action-dialog`)))
	status = act(b, row("S")+` button.skip`, "bob", "refunded by hand", "ok", "skip of dead letter "+itoa(dls["S-1"]))
	require.Contains(t, status, "skip of dead letter "+itoa(dls["S-1"])+" done")
	req = d.requestOf(t, status)
	require.Equal(t, []any{"skip", "bob", "refunded by hand", "done"}, []any{req["action"], req["by"], req["reason"], req["state"]})
	require.Equal(t, "skipped", d.admin(t, "GET", "/v1/admin/dlq/"+itoa(dls["S-1"]), "", 200)["state"])
	require.Equal(t, "applied", d.outcome(t, "S-2"))
	b.do("S leaves the stuck keys", chromedp.WaitNotPresent(css(row("S"))))

	// Release G, blocked by its expired hold: the gap names who and why.
	b.do("open the release", chromedp.Click(css(row("G")+` button.release`)), chromedp.WaitVisible(css(`#action-dialog`)),
		fill(`#action-by`, "carol"), fill(`#action-reason`, "v2 never existed"))
	b.shot("5-release-dialog")
	b.do("confirm the release with Enter", chromedp.SendKeys(css(`#action-reason`), kb.Enter))
	status = b.status("ok", "release of key G")
	b.do("the dialog stays closed", chromedp.WaitNotVisible(css(`#action-dialog`)))
	require.False(t, eval[bool](b, `document.querySelector("#action-dialog").open`))
	require.Contains(t, status, "release of key G done (applied), by carol")
	g := d.admin(t, "GET", "/v1/admin/keys/G", "", 200)
	require.Equal(t, "ok", g["status"])
	gaps := list(t, g, "gaps")
	require.Len(t, gaps, 1)
	require.Equal(t, []any{2.0, 2.0, "carol", "v2 never existed"}, []any{gaps[0]["from_version"], gaps[0]["to_version"], gaps[0]["decided_by"], gaps[0]["reason"]})
	require.Equal(t, "applied", d.outcome(t, "g3"))

	// Nothing is stuck now, on the page as in the API.
	b.do("no stuck key", chromedp.WaitVisible(css(`#stuck-empty`)), chromedp.WaitVisible(css(`#dlq-empty`)))
	require.Empty(t, d.stuckKeys(t))
	require.Empty(t, d.openDLQ(t))
	b.do("the tiles clear", chromedp.WaitVisible(css(`[data-tile="blocked"]:not(.bad)`)), chromedp.WaitVisible(css(`[data-tile="dlq"]:not(.bad)`)))
	require.Equal(t, "0", tile("blocked"))
	require.Equal(t, "-", tile("oldest"))
	require.Equal(t, "3", tile("rejected"))
	b.shot("6-after-actions")
}

// The dashboard's time formatting, in the browser: relative phrases in
// whole units, RFC 3339 with microseconds read exactly to the
// millisecond, the exact time on hover, and ages by the server's clock
// (the overview's now), not the browser's.
func TestDashboardTimeFormatting(t *testing.T) {
	b := newBrowser(t)
	r := start(t, Options{})
	b.do("open the page", chromedp.Navigate(r.url+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	require.Equal(t, []string{"40 s ago", "3 min ago", "in 40 s", "59 min ago", "2 h ago", "47 h ago", "2 d ago", "just now", "in 3 d", "5 s"},
		eval[[]string](b, `[relative(-40), relative(-200), relative(40), relative(-3599), relative(-7300), relative(-47.9*3600),
			relative(-48*3600), relative(0.4), relative(3*86400+5), duration(5.9)]`))
	require.Equal(t, int64(1767323045123), eval[int64](b, `parseTime("2026-01-02T03:04:05.123456Z")`))
	require.True(t, strings.HasPrefix(eval[string](b, `exactTime("2026-01-02T03:04:05.123456Z")`), "2026-01-02T03:04:05.123456Z ("))
	// The server's clock is an hour ahead of the browser's: a time an hour
	// ago by the browser is now by the server.
	require.Equal(t, []string{"just now", "1 h ago", "1 h"}, eval[[]string](b, `(() => {
		const hour = 3600 * 1000, browserNow = Date.now();
		syncClock(new Date(browserNow + hour).toISOString());
		return [timeText(new Date(browserNow + hour).toISOString()), timeText(new Date(browserNow).toISOString()),
			timeText(new Date(browserNow).toISOString(), "age")];
	})()`))
	require.Equal(t, "-", eval[string](b, `String(timeEl(null))`))
	held := eval[[]string](b, `(() => { const e = timeEl("2026-01-02T03:04:05.123456Z"); return [e.tagName, e.getAttribute("datetime"), e.title.slice(0, 28)]; })()`)
	require.Equal(t, []string{"TIME", "2026-01-02T03:04:05.123456Z", "2026-01-02T03:04:05.123456Z "}, held)
}
