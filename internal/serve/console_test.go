package serve

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// consoleSetup is a gateway with an agent and what an operator on call
// meets: invoice-9's version 1 dead-lettered (the agent refuses it with a
// long error chain) with versions 2 and 3 parked behind it, redriven once
// and failed again; order-1 at version 2, which met two stale copies of
// version 1; order-10 beside it; three dead letters (bulk-a, bulk-b,
// bulk-c) the agent refuses until told otherwise; an uncertain agent call
// in the ledger (ghost-1); and a spike of 34 events applied at once.
type consoleSetup struct {
	*running
	mu      sync.Mutex
	refused map[string]bool
}

// longRefusal is the agent's refusal: a long chain of causes.
var longRefusal = `{"title":"unknown customer","status":422,"detail":"` + strings.Repeat("lookup of customer c-1 failed: upstream CRM said no: ", 6) + `end of chain"}`

func (c *consoleSetup) refuse(key string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refused[key] = on
}

func newConsoleSetup(t *testing.T) *consoleSetup {
	c := &consoleSetup{refused: map[string]bool{"invoice-9": true, "bulk-a": true, "bulk-b": true, "bulk-c": true}}
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		refuse := c.refused[r.Header.Get(HeaderPartitionKey)] && r.Header.Get(HeaderObjectVersion) == "1"
		c.mu.Unlock()
		if refuse {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(longRefusal))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(agent.Close)
	c.running = start(t, Options{AgentURL: agent.URL})
	d := &dashboardSetup{running: c.running}

	// invoice-9: a rich envelope, dead-lettered, two successors parked.
	c.post(t, `{"specversion":"1.0","id":"inv-9-1","source":"billing","type":"invoice.issued","subject":"invoice 9","tenantid":"acme",`+
		`"partitionkey":"invoice-9","objectversion":1,"data":{"amount":12.5,"currency":"EUR","customer":{"id":"c-1","name":"Ana"},"lines":[{"sku":"A-1","qty":2}]}}`)
	c.post(t, `{"specversion":"1.0","id":"inv-9-2","source":"billing","type":"invoice.paid","partitionkey":"invoice-9","objectversion":2,"data":{"paid":true}}`)
	c.post(t, `{"specversion":"1.0","id":"inv-9-3","source":"billing","type":"invoice.closed","partitionkey":"invoice-9","objectversion":3,"data":{}}`)
	d.waitKeys(t, "invoice-9 blocked, two parked behind it", func(keys map[string]map[string]any) bool {
		return keys["invoice-9"]["blocked_messages"] == float64(2)
	})
	seq := c.deadLetter(t, "inv-9-1")
	res := c.admin(t, "POST", "/v1/admin/dlq/"+itoa(seq)+"/redrive", `{"by":"erin","reason":"agent redeployed"}`, 200)
	require.Equal(t, "dead_lettered", list(t, res, "results")[0]["outcome"])

	// order-1 at version 2 meets two stale copies of version 1.
	c.post(t, ev("o1", "order-1", 1, `{"n":1}`))
	c.post(t, ev("o2", "order-1", 2, `{"n":2}`))
	c.post(t, ev("p1", "order-10", 1, `{"n":1}`))
	eventually(t, "order-1 at 2", func() bool { return d.outcome(t, "o2") == "applied" && d.outcome(t, "p1") == "applied" })
	c.post(t, ev("s1", "order-1", 1, `{"n":"late"}`))
	c.post(t, ev("s2", "order-1", 1, `{"n":"later"}`))
	eventually(t, "two stale copies", func() bool { return d.outcome(t, "s1") == "stale" && d.outcome(t, "s2") == "stale" })

	for _, k := range []string{"bulk-a", "bulk-b", "bulk-c"} {
		c.post(t, ev(k+"-1", k, 1, `{"n":1}`))
	}
	eventually(t, "three more dead letters", func() bool { return len(d.openDLQ(t)) == 4 })

	// A consumer that stopped an hour ago, beside the gateway's.
	old := time.Now().Add(-time.Hour)
	require.NoError(t, c.store.Executor().ConsumerRegister(context.Background(), store.Registration{Consumer: "billing-sync",
		HandlerKind: store.HandlerApplication, Policies: []byte(`{"gap_policy":"advance","max_attempts":3}`), Process: "worker-2:4411",
		StartedAt: old.Add(-time.Minute), HeartbeatAt: old}))

	// An agent call nobody knows the end of.
	l, err := effects.New(c.store, effects.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	_, err = l.DoFor(context.Background(), seqboxtype.Identity{Consumer: c.opt.Consumer, Source: "crm", ID: "ghost-1"}, AgentAction,
		func(context.Context, string) (string, error) { return "", errors.New("connection reset by peer") })
	var unc *effects.UncertainError
	require.ErrorAs(t, err, &unc)

	// A spike: 34 events in one request.
	var batch []string
	for i := range 34 {
		batch = append(batch, ev("spike-"+strconv.Itoa(i), "spike-"+strconv.Itoa(i), 1, `{}`))
	}
	code, _, _ := c.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaBatch}, "["+strings.Join(batch, ",")+"]")
	require.Equal(t, http.StatusAccepted, code)
	eventually(t, "the spike applied", func() bool { return d.outcome(t, "spike-33") == "applied" })
	return c
}

// deadLetter is the open DLQ seq of event id.
func (c *consoleSetup) deadLetter(t *testing.T, id string) int64 {
	t.Helper()
	seq, ok := (&dashboardSetup{running: c.running}).openDLQ(t)[id]
	require.True(t, ok, "no open dead letter for %s", id)
	return seq
}

// openConsole opens the dashboard with the admin token.
func openConsole(b *browser, url string) {
	b.do("open the dashboard", chromedp.Navigate(url+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	b.do("enter the token", chromedp.SendKeys(chromedp.CSS(`#token`), testToken), chromedp.Click(chromedp.CSS(`#login-button`)),
		chromedp.WaitVisible(chromedp.CSS(`#app`)))
}

// onPage waits for the dashboard to have drawn page.
func onPage(b *browser, page string) {
	b.t.Helper()
	b.do("on the "+page+" page", chromedp.WaitVisible(chromedp.CSS(`body[data-page="`+page+`"] #page-`+page)))
}

// keysWhole reports the keys (a.key) the page shows broken across lines.
func keysBroken(b *browser) []string {
	return eval[[]string](b, `[...document.querySelectorAll("a.key")].filter((e) => e.offsetParent !== null && e.getClientRects().length > 1).map((e) => e.textContent)`)
}

// The operator's console end to end in Chromium, at 1440 px: a dead
// letter's page with its envelope's attributes apart from its data
// (pretty JSON), its attempts and errors (the long ones collapsed), its
// history and its key's parked successors; a key page reached by search;
// the recent outcomes filtered to the stale ones, each with its reason
// and the version it met; an uncertain call resolved from the page, with
// who and why; the consumers with their heartbeats; a bulk redrive of
// three dead letters behind one confirmation naming the count, with a
// result per dead letter; the chart with the spike and the failures both
// visible, nothing before the server started; keys never broken across
// lines; and, without an admin token, a page saying how to open it.
func TestConsoleInBrowser(t *testing.T) {
	b := newBrowser(t)
	c := newConsoleSetup(t)
	type css = chromedp.CSS
	b.do("a 1440 px wide window", chromedp.EmulateViewport(1440, 1000))
	openConsole(b, c.url)
	onPage(b, "overview")

	// A dead letter's page, from the DLQ table.
	seq := itoa(c.deadLetter(t, "inv-9-1"))
	b.do("the dead letter's link", chromedp.WaitVisible(css(`#dlq tbody tr[data-seq="`+seq+`"] a.dl-link`)))
	require.Empty(t, keysBroken(b), "no key broken across lines on the overview")
	require.Equal(t, "true", eval[string](b, `String(document.querySelector('#dlq tbody tr[data-seq="`+seq+`"] td.reason details.long') !== null)`),
		"the long error chain is collapsed in the DLQ table")
	b.do("open the dead letter", chromedp.Click(css(`#dlq tbody tr[data-seq="`+seq+`"] a.dl-link`)))
	onPage(b, "deadletter")
	b.do("its parked successors", chromedp.WaitVisible(css(`#dl-parked tbody tr[data-version="3"]`)))
	require.Equal(t, []string{"specversion", "id", "source", "type", "subject", "tenantid", "partitionkey", "objectversion"},
		eval[[]string](b, `[...document.querySelectorAll("#dl-attributes tr")].map((r) => r.dataset.attr)`), "the attributes, data apart")
	require.Equal(t, "invoice 9", b.text(`#dl-attributes tr[data-attr="subject"] td`))
	require.Equal(t, `{
  "amount": 12.5,
  "currency": "EUR",
  "customer": {
    "id": "c-1",
    "name": "Ana"
  },
  "lines": [
    {
      "sku": "A-1",
      "qty": 2
    }
  ]
}`, b.text(`#dl-data pre`), "data as pretty JSON")
	require.Contains(t, b.text(`#dl-facts`), "billing / inv-9-1")
	errs := b.text(`#dl-errors`)
	require.Regexp(t, `attempts\s+\d+`, errs)
	require.Contains(t, errs, "failed redrives\n1")
	require.Equal(t, 2, eval[int](b, `document.querySelectorAll("#dl-errors details.long:not([open])").length`),
		"the first and last errors, long, are collapsed")
	b.do("expand the last error", chromedp.Click(css(`#dl-errors dd:last-of-type details.long summary`)))
	require.Contains(t, b.text(`#dl-errors dd:last-of-type details.long .full`), "end of chain")
	require.Len(t, eval[[]string](b, `[...document.querySelectorAll("#dl-history li")].map((e) => e.textContent)`), 1, "one failed redrive on its history")
	require.Equal(t, []string{"2", "3"}, eval[[]string](b, `[...document.querySelectorAll("#dl-parked tbody tr")].map((r) => r.dataset.version)`))
	b.do("its actions", chromedp.WaitVisible(css(`#dl-actions button.redrive`)), chromedp.WaitVisible(css(`#dl-actions button.skip`)))
	b.shot("console-1-dead-letter")

	// A key page, reached by search.
	b.do("search order-1", fill(`#key-search-q`, "order-1"), chromedp.SendKeys(css(`#key-search-q`), kb.Enter))
	onPage(b, "keys")
	b.do("the matches", chromedp.WaitVisible(css(`#keys-table tbody tr[data-key="order-10"]`)))
	require.Equal(t, []string{"order-1", "order-10"}, eval[[]string](b, `[...document.querySelectorAll("#keys-table tbody tr")].map((r) => r.dataset.key)`),
		"any key, stuck or not; the exact match first")
	require.Empty(t, keysBroken(b))
	b.shot("console-2-key-search")
	b.do("open order-1", chromedp.Click(css(`#keys-table tbody tr[data-key="order-1"] a.key`)))
	onPage(b, "key")
	b.do("its audit trail", chromedp.WaitVisible(css(`#key-audit tbody tr[data-id="s2"]`)))
	require.Equal(t, "order-1", b.text(`#key-name`))
	facts := b.text(`#key-facts`)
	require.Contains(t, facts, "version\n2")
	require.Contains(t, facts, "waits for\nversion 3")
	require.Equal(t, []string{"s2 stale 1 2", "s1 stale 1 2"}, eval[[]string](b, `[...document.querySelectorAll("#key-audit tbody tr")].map((r) =>
		r.dataset.id + " " + r.dataset.outcome + " " + r.querySelector(".received").textContent + " " + r.querySelector(".met").textContent)`),
		"newest first, with the version each met")
	b.shot("console-3-key-page")

	// The recent outcomes, filtered to the stale ones.
	b.do("the outcomes page", chromedp.Click(css(`#nav a[data-page="outcomes"]`)))
	onPage(b, "outcomes")
	b.do("every outcome", chromedp.WaitVisible(css(`#outcomes-table tbody tr[data-outcome="dead_lettered"]`)))
	b.do("tick stale", chromedp.Click(css(`#outcome-filter input[value="stale"]`)))
	b.do("only the stale ones", chromedp.WaitNotPresent(css(`#outcomes-table tbody tr:not([data-outcome="stale"])`)),
		chromedp.WaitVisible(css(`#outcomes-table tbody tr[data-id="s1"]`)))
	require.Contains(t, eval[string](b, `location.hash`), "outcome=stale")
	rows := eval[[]string](b, `[...document.querySelectorAll("#outcomes-table tbody tr")].map((r) =>
		[r.dataset.outcome, r.querySelector("td.object").textContent, r.querySelector(".received").textContent, r.querySelector(".met").textContent,
		 r.querySelector("td.reason").textContent.length > 0].join(" "))`)
	require.Equal(t, []string{"stale order-1 1 2 true", "stale order-1 1 2 true"}, rows)
	require.Empty(t, keysBroken(b))
	b.shot("console-4-stale-outcomes")

	// An uncertain call, resolved from the page.
	b.do("the effects page", chromedp.Click(css(`#nav a[data-page="effects"]`)))
	onPage(b, "effects")
	b.do("the uncertain calls", chromedp.Click(css(`#effects-states button[data-state="uncertain"]`)),
		chromedp.WaitVisible(css(`#effects-states button[data-state="uncertain"][aria-pressed="true"]`)),
		chromedp.WaitVisible(css(`#effects-table tbody tr[data-id="ghost-1"][data-state="uncertain"] button.resolve`)))
	require.Equal(t, []string{"uncertain"}, eval[[]string](b, `[...document.querySelectorAll("#effects-table tbody tr")].map((r) => r.dataset.state)`))
	b.do("resolve it", chromedp.Click(css(`#effects-table tbody tr[data-id="ghost-1"] button.resolve`)), chromedp.WaitVisible(css(`#action-dialog`)))
	b.do("succeeded, without its reference", chromedp.Click(css(`#resolve-succeeded`)), fill(`#action-by`, "dana"),
		fill(`#action-reason`, "found it in the agent's log"), chromedp.Click(css(`#action-confirm`)))
	require.Contains(t, b.text(`#action-error`), "reference")
	b.do("with its reference", fill(`#resolve-ref`, "agent-ref-7"))
	b.shot("console-5-resolve-dialog")
	b.do("confirm", chromedp.Click(css(`#action-confirm`)))
	status := b.status("ok", "resolved as succeeded")
	require.Contains(t, status, "the call of crm / ghost-1 is resolved as succeeded, by dana")
	b.do("no uncertain call left", chromedp.WaitNotPresent(css(`#effects-table tbody tr[data-id="ghost-1"]`)))
	rowsOf := list(t, c.admin(t, "GET", "/v1/admin/effects?state=succeeded", "", 200), "effects")
	var ghost map[string]any
	for _, e := range rowsOf {
		if e["id"] == "ghost-1" {
			ghost = e
		}
	}
	require.NotNil(t, ghost)
	require.Equal(t, "agent-ref-7", ghost["ref"])
	require.Contains(t, ghost["last_error"], "dana")
	b.shot("console-6-effect-resolved")

	// The consumers.
	b.do("the consumers page", chromedp.Click(css(`#nav a[data-page="consumers"]`)))
	onPage(b, "consumers")
	b.do("the gateway's consumer, live", chromedp.WaitVisible(css(`#consumers-table tbody tr[data-name="gateway"][data-live="true"]`)))
	b.do("the stopped one, not live", chromedp.WaitVisible(css(`#consumers-table tbody tr[data-name="billing-sync"][data-live="false"]`)))
	require.Equal(t, "1 h ago", b.text(`#consumers-table tbody tr[data-name="billing-sync"] td.heartbeat time`))
	gw := `#consumers-table tbody tr[data-name="gateway"] `
	require.Contains(t, b.text(gw+`td.key`), "this gateway")
	require.Regexp(t, `^\d+ of \d+$`, b.text(gw+`td.in-flight`))
	require.Equal(t, "closed", b.text(gw+`td.circuit span`))
	require.Regexp(t, `^(just now|\d+ s ago)$`, b.text(gw+`td.heartbeat time`))
	b.do("its policies", chromedp.Click(css(gw+`details.policies summary`)))
	require.Contains(t, b.text(gw+`details.policies`), "gap_policy")
	b.shot("console-7-consumers")

	// A bulk redrive of three dead letters, once the agent takes them.
	for _, k := range []string{"bulk-a", "bulk-b", "bulk-c"} {
		c.refuse(k, false)
	}
	dls := (&dashboardSetup{running: c.running}).openDLQ(t)
	b.do("the overview", chromedp.Click(css(`#nav a[data-page="overview"]`)))
	onPage(b, "overview")
	var nums []int64
	for _, id := range []string{"bulk-a-1", "bulk-b-1", "bulk-c-1"} {
		nums = append(nums, dls[id])
	}
	slices.Sort(nums) // the table's order, oldest first
	var seqs []string
	for _, n := range nums {
		seqs = append(seqs, itoa(n))
		b.do("select dead letter "+itoa(n), chromedp.Click(css(`#dlq tbody tr[data-seq="`+itoa(n)+`"] input.pick`)))
	}
	b.do("three selected", chromedp.WaitVisible(css(`#bulk-redrive:not([disabled])`)))
	require.Equal(t, "3 dead letters selected", b.text(`#bulk-count`))
	b.do("redrive them", chromedp.Click(css(`#bulk-redrive`)), chromedp.WaitVisible(css(`#action-dialog`)))
	require.Equal(t, "Redrive 3 dead letters", b.text(`#action-title`), "one confirmation, naming the count")
	require.Equal(t, "Redrive 3 dead letters", b.text(`#action-confirm`))
	require.Equal(t, []string{"dead letter " + seqs[0], "dead letter " + seqs[1], "dead letter " + seqs[2]},
		eval[[]string](b, `[...document.querySelectorAll("#action-items li")].map((e) => e.textContent)`))
	b.do("who and why", fill(`#action-by`, "frank"), fill(`#action-reason`, "customer records restored"))
	b.shot("console-8-bulk-confirm")
	b.do("confirm", chromedp.Click(css(`#action-confirm`)))
	require.Contains(t, b.status("ok", "redrive of 3 dead letters: 3 done, 0 failed"), "(each listed under the dead letters)")
	require.Equal(t, []string{seqs[0] + " true", seqs[1] + " true", seqs[2] + " true"},
		eval[[]string](b, `[...document.querySelectorAll("#bulk-results-list li")].map((e) => e.dataset.seq + " " + e.dataset.ok)`), "a result per dead letter")
	for _, s := range seqs {
		dl := c.admin(t, "GET", "/v1/admin/dlq/"+s, "", 200)
		require.Equal(t, "redriven", dl["state"], "dead letter %s", s)
		b.do("dead letter "+s+" leaves the table", chromedp.WaitNotPresent(css(`#dlq tbody tr[data-seq="`+s+`"]`)))
	}
	for _, id := range []string{"bulk-a-1", "bulk-b-1", "bulk-c-1"} {
		require.Equal(t, "applied", (&dashboardSetup{running: c.running}).outcome(t, id))
	}
	for i, line := range eval[[]string](b, `[...document.querySelectorAll("#bulk-results-list li")].map((e) => e.textContent)`) {
		require.Regexp(t, `^done · dead letter `+seqs[i]+`: done \(applied\), by frank \(request \d+\)$`, line)
	}
	for _, n := range eval[[]string](b, `[...document.querySelectorAll("#bulk-results-list li")].map((e) => e.dataset.request)`) {
		req := c.admin(t, "GET", "/v1/admin/requests/"+n, "", 200)
		require.Equal(t, []any{"redrive", "frank", "customer records restored"}, []any{req["action"], req["by"], req["reason"]})
	}
	b.shot("console-9-bulk-results")

	// The chart: the spike and the failures both visible, on a log scale
	// by default; nothing before the server started.
	b.do("the chart's bars", chromedp.WaitVisible(css(`#chart svg[data-scale="log"] rect[data-outcome="dead_lettered"]`)))
	bars := eval[[]float64](b, `(() => {
		const rects = [...document.querySelectorAll("#chart rect")];
		const h = (k) => Math.min(...rects.filter((r) => r.dataset.outcome === k).map((r) => +r.getAttribute("height")));
		const tallest = Math.max(...[...document.querySelectorAll("#chart g.bar")].map((g) =>
			[...g.querySelectorAll("rect")].reduce((s, r) => s + +r.getAttribute("height"), 0)));
		const applied = Math.max(...rects.filter((r) => r.dataset.outcome === "applied").map((r) => +r.dataset.count));
		const start = +document.querySelector("#chart .start-line").getAttribute("x1");
		const first = Math.min(...rects.map((r) => +r.getAttribute("x")));
		return [h("dead_lettered"), tallest, applied, first - start];
	})()`)
	require.GreaterOrEqual(t, bars[2], 17.0, "a spike: at least half the 34 events in one bucket")
	require.GreaterOrEqual(t, bars[0]/bars[1], 0.12, "one dead letter is at least an eighth of the spike's bar: %v", bars)
	require.GreaterOrEqual(t, bars[3], -0.1, "no bar before the server started (to the rounding of a bar's x)")
	require.Contains(t, b.text(`#chart .axis-y .axis-title`), "results per 5 s (log)")
	require.NotContains(t, b.text(`#chart`), "decision")
	require.Contains(t, b.text(`#legend`), "dead_lettered")
	b.shotOf("console-10-chart", `#page-overview section:nth-of-type(2)`)
	b.do("the linear scale", chromedp.Click(css(`#scale-linear`)), chromedp.WaitVisible(css(`#chart svg[data-scale="linear"]`)))
	require.GreaterOrEqual(t, eval[float64](b, `Math.min(...[...document.querySelectorAll('#chart rect[data-outcome="dead_lettered"]')].map((r) => +r.getAttribute("height")))`),
		float64(3), "on a linear scale too, a failure keeps a visible height")
	b.shotOf("console-11-chart-linear", `#page-overview section:nth-of-type(2)`)

	// Without an admin token, a page that says how to open the dashboard.
	// (A browser of its own, closed before that gateway stops: a
	// connection Chromium opened ahead would hold its shutdown.)
	off := start(t, Options{AdminToken: "-"})
	b2 := newBrowser(t)
	b2.do("the dashboard of a gateway without a token", chromedp.Navigate(off.url+"/ui/"), chromedp.WaitVisible(css(`h1`)))
	require.Equal(t, "The seqbox dashboard is turned off", b2.text(`h1`))
	require.Contains(t, b2.text(`body`), "--admin-token")
	b2.shot("console-12-no-token")
}
