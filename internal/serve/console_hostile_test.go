package serve

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// refusingAgent is an agent that refuses every event (422): each one is
// dead-lettered at once.
func refusingAgent(t *testing.T) string {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"title":"refused","status":422}`))
	}))
	t.Cleanup(agent.Close)
	return agent.URL
}

// A stranger's console findings, in Chromium:
//   - an event whose data nests 5000 levels deep, and a collision of it,
//     overflowed the browser's stack: the overview's refresh failed and
//     its collisions showed none, and that dead letter's page kept the
//     data and parked messages of the dead letter shown before it;
//   - #/dlq/N for a number with no dead letter kept the previous dead
//     letter's page, its redrive and skip buttons working on it;
//   - a key "evil\u202eexe.txt" read "eviltxt.exe", and " lead" read
//     "lead";
//   - one 1024-byte key pushed every stuck row's actions off the screen.
func TestConsoleDrawsHostileEventsWholeOrNotAtAll(t *testing.T) {
	r := start(t, Options{AgentURL: refusingAgent(t)})
	d := &dashboardSetup{running: r}
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	r.post(t, `{"specversion":"1.0","id":"plain","source":"s","type":"t","partitionkey":"plain-1","objectversion":1,"data":{"why":"bad amount"}}`)
	r.post(t, `{"specversion":"1.0","id":"deep","source":"s","type":"t","partitionkey":"deep-1","objectversion":1,"data":{"n":`+deep+`}}`)
	r.postWant(t, `{"specversion":"1.0","id":"deep","source":"s","type":"t","partitionkey":"deep-1","objectversion":1,"data":{"n":[[1]]}}`, http.StatusConflict)
	r.post(t, `{"specversion":"1.0","id":"evil","source":"s","type":"t","partitionkey":"evil\u202eexe.txt","objectversion":1}`)
	r.post(t, `{"specversion":"1.0","id":"lead","source":"s","type":"t","partitionkey":" lead","objectversion":1}`)
	long := strings.Repeat("k", 1024)
	r.post(t, `{"specversion":"1.0","id":"long","source":"s","type":"t","partitionkey":"`+long+`","objectversion":1}`)
	eventually(t, "five dead letters", func() bool { return len(d.openDLQ(t)) == 5 })
	dl := d.openDLQ(t)

	b := newBrowser(t)
	type css = chromedp.CSS
	b.do("a 1400 px wide window", chromedp.EmulateViewport(1400, 1000))
	openConsole(b, r.url)
	onPage(b, "overview")
	b.do("the collision", chromedp.WaitVisible(css(`#collisions .collision[data-id="deep"]`)))
	require.NotContains(t, b.text(`#status`), "refresh failed")
	require.Equal(t, `evil\u202eexe.txt`, b.text("#stuck-keys tbody tr[data-key=\"evil\u202eexe.txt\"] a.key"), "the override shown, not obeyed")
	require.Equal(t, " lead", eval[string](b, `document.querySelector('#stuck-keys tbody tr[data-key=" lead"] a.key').innerText`))
	require.LessOrEqual(t, eval[float64](b, `Math.max(...[...document.querySelectorAll("#stuck-keys tbody button.act")].map((e) => e.getBoundingClientRect().right))`),
		eval[float64](b, `window.innerWidth`), "a stuck row's actions off the screen")

	// The plain dead letter's page, then the deep one's: nothing of the
	// first stays.
	b.do("the plain dead letter", chromedp.Navigate(r.url+"/ui/#/dlq/"+itoa(dl["plain"])))
	onPage(b, "deadletter")
	b.do("its data", chromedp.WaitVisible(css(`#dl-data pre`)))
	require.Contains(t, b.text(`#dl-data pre`), "bad amount")
	b.do("the deep dead letter", chromedp.Navigate(r.url+"/ui/#/dlq/"+itoa(dl["deep"])))
	b.do("its facts", chromedp.WaitVisible(css(`#dl-facts`)))
	eventually(t, "the deep dead letter drawn", func() bool { return strings.Contains(b.text(`#dl-facts`), "s / deep") })
	data := b.text(`#dl-data`)
	require.NotContains(t, data, "bad amount", "another dead letter's data under this one's number")
	require.Contains(t, data, "[…]", "the levels past the cut")
	require.NotContains(t, b.text(`#status`), "refresh failed")

	// A number with no dead letter: nothing to act on.
	b.do("a dead letter that does not exist", chromedp.Navigate(r.url+"/ui/#/dlq/99999"))
	eventually(t, "not found said", func() bool { return strings.Contains(b.text(`#status`), "dead letter 99999") })
	require.Zero(t, eval[int](b, `document.querySelectorAll("#dl-actions button").length`), "buttons left from the page before")
	require.Empty(t, strings.TrimSpace(b.text(`#dl-facts`)))
	require.Empty(t, strings.TrimSpace(b.text(`#dl-data`)))
}
