package serve

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The overview draws the 100 oldest stuck keys and open dead letters, says
// how many there are, and draws 100 more on asking. Before, it drew every
// one: a stranger's 1,008 dead letters made a page 800,000 pixels tall,
// redrawn on each refresh.
func TestConsoleDrawsAHundredDeadLettersAtATime(t *testing.T) {
	r := start(t, Options{AgentURL: refusingAgent(t)})
	d := &dashboardSetup{running: r}
	const n = 105
	for i := range n {
		r.post(t, fmt.Sprintf(`{"specversion":"1.0","id":"e%03d","source":"s","type":"t","partitionkey":"k%03d","objectversion":1}`, i, i))
	}
	eventually(t, "105 dead letters", func() bool { return len(d.openDLQ(t)) == n })

	b := newBrowser(t)
	openConsole(b, r.url)
	onPage(b, "overview")
	rows := func(table string) int {
		return eval[int](b, `document.querySelectorAll("`+table+` tbody tr").length`)
	}
	for _, part := range []struct{ table, more, what string }{
		{"#dlq", "#dlq-more", "open dead letters"}, {"#stuck-keys", "#stuck-more", "stuck keys"},
	} {
		b.do(part.what+": more offered", chromedp.WaitVisible(chromedp.CSS(part.more)))
		require.Equal(t, 100, rows(part.table), part.what)
		require.Contains(t, b.text(part.more), "the 100 oldest of 105 "+part.what)
		b.do("show more "+part.what, chromedp.Click(chromedp.CSS(part.more+" button")))
		eventually(t, "every one of the "+part.what, func() bool { return rows(part.table) == n })
		b.do(part.what+": nothing more offered", chromedp.WaitNotVisible(chromedp.CSS(part.more)))
	}
	seqs := slices.Sorted(maps.Values(d.openDLQ(t)))
	want := make([]string, len(seqs))
	for i, seq := range seqs {
		want[i] = itoa(seq)
	}
	require.Equal(t, want, eval[[]string](b, `[...document.querySelectorAll("#dlq tbody tr")].map((tr) => tr.dataset.seq)`),
		"every one, the oldest first")
}

// The login page's token field has a label a screen reader reads, and the
// page names its icon, so the browser asks the gateway for no
// /favicon.ico (a stranger's findings: an unlabelled field, a 404 in the
// log at every visit).
func TestTheLoginFieldIsLabelled(t *testing.T) {
	r := start(t, Options{})
	b := newBrowser(t)
	b.do("open the dashboard", chromedp.Navigate(r.url+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	require.Equal(t, "Admin token", eval[string](b, `document.querySelector("#token").labels[0].textContent`))
	require.Equal(t, "data:,", eval[string](b, `document.querySelector('link[rel="icon"]').getAttribute("href")`))
}

// The console judges a redrive by its own message's last result, as the
// CLI does: before, it read the first, so a redrive whose message was
// retried and then dead-lettered said "done".
func TestTheConsoleJudgesARedriveByItsOwnMessagesLastResult(t *testing.T) {
	r := start(t, Options{})
	b := newBrowser(t)
	b.do("open the dashboard", chromedp.Navigate(r.url+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	judge := func(results string) bool {
		return eval[bool](b, `describeResult("redrive", "1", {request: 1, by: "ana", results: `+results+`}).ok`)
	}
	e1 := func(outcome string) string {
		return `{source: "crm", id: "e1", outcome: "` + outcome + `", reason: "r"}`
	}
	require.False(t, judge(`[`+e1("retry")+`, `+e1("dead_lettered")+`]`), "retried, then dead-lettered: failed again")
	require.True(t, judge(`[`+e1("retry")+`, `+e1("applied")+`]`), "retried, then applied")
	require.True(t, judge(`[`+e1("applied")+`, {source: "crm", id: "e2", outcome: "dead_lettered"}]`), "its successor's failure is not its own")
	require.False(t, judge(`[{outcome: "rejected", reason: "r"}]`), "rejected without an identity")
}

// The inbox tile says how old its count is once that is 10 s or more: a
// large inbox is counted seldom (inboxCounts), and a stale number must
// not pass for a fresh one.
func TestTheInboxTileSaysHowOldItsCountIs(t *testing.T) {
	r := start(t, Options{})
	r.inboxCounts.mu.Lock()
	r.inboxCounts.now = func() time.Time { return time.Now().Add(-time.Minute) }
	r.inboxCounts.mu.Unlock()
	b := newBrowser(t)
	openConsole(b, r.url)
	onPage(b, "overview")
	b.do("the inbox tile", chromedp.WaitVisible(chromedp.CSS(`[data-tile="inbox"]`)))
	label := b.text(`[data-tile="inbox"] .k`)
	require.Regexp(t, `^inbox rows \(6\d s ago\)$`, label)
	require.Contains(t, eval[string](b, `document.querySelector('[data-tile="inbox"]').title`), "Counted at ")
}

// A key's page draws its 100 lowest parked messages, says how many there
// are, and draws 100 more on asking: a key blocked for a weekend may hold
// a hundred thousand, and the page drew them all.
func TestTheKeyPageDrawsAHundredParkedMessagesAtATime(t *testing.T) {
	r := start(t, Options{})
	seq := blockKey(t, r, "K")
	const n = 105
	for v := 3; v <= n+1; v++ {
		r.post(t, ev(fmt.Sprintf("K-%d", v), "K", v, `{"n":1}`))
	}
	eventually(t, "105 parked behind K", func() bool {
		return r.admin(t, "GET", "/v1/admin/keys/K?parked_limit=1", "", 200)["parked_total"] == float64(n)
	})
	b := newBrowser(t)
	openConsole(b, r.url)
	b.do("open K's page", chromedp.Navigate(r.url+"/ui/#/key/K"))
	onPage(b, "key")
	rows := func() int { return eval[int](b, `document.querySelectorAll("#key-parked tbody tr").length`) }
	b.do("more offered", chromedp.WaitVisible(chromedp.CSS(`#key-parked-more`)))
	require.Equal(t, 100, rows())
	require.Contains(t, b.text(`#key-parked-more`), "the 100 lowest of 105 parked messages")
	b.do("show more", chromedp.Click(chromedp.CSS(`#key-parked-more button`)))
	eventually(t, "every parked message", func() bool { return rows() == n })
	b.do("nothing more offered", chromedp.WaitNotVisible(chromedp.CSS(`#key-parked-more`)))
	require.Equal(t, "2", eval[string](b, `document.querySelector("#key-parked tbody tr").dataset.version`), "the lowest version first")

	// The dead letter's page draws the first 100 of its successors and
	// says where the rest are.
	b.do("open its dead letter's page", chromedp.Navigate(r.url+"/ui/#/dlq/"+itoa(seq)))
	onPage(b, "deadletter")
	b.do("the rest named", chromedp.WaitVisible(chromedp.CSS(`#dl-parked-more`)))
	require.Equal(t, 100, eval[int](b, `document.querySelectorAll("#dl-parked tbody tr").length`))
	require.Equal(t, "the 100 lowest of 105 parked on its key; all of them on K", b.text(`#dl-parked-more`))
}
