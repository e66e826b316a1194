package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// An ingest token shorter than 16 characters is refused at start, by flag
// and by environment, with one line naming the flag.
func TestServeRefusesShortIngestToken(t *testing.T) {
	line := fails(t, "serve", "--db", filepath.Join(t.TempDir(), "s.db"), "--ingest-token", "short")
	require.Contains(t, line, "--ingest-token")
	require.Contains(t, line, "16 characters")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--db", filepath.Join(t.TempDir(), "s.db"))
	cmd.Env = append(environ(), "SEQBOX_INGEST_TOKEN=0123456789abcde")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "--ingest-token")
}

// A page of another origin, opened in a real browser, tries to inject
// events into a gateway without an ingest token in every way a page may
// POST without a CORS preflight (a string body is text/plain, a Blob
// without a type has no Content-Type at all, form bodies), and once with
// a CloudEvents type, which needs a preflight the gateway does not grant.
// The requests reach the gateway, which refuses each one with 415:
// nothing is queued.
func TestServeIngestRefusesCrossSiteBrowserPost(t *testing.T) {
	browser := chromium(t)
	s := startServe(t, nil, "--db", filepath.Join(t.TempDir(), "seqbox.db"), "--admin-token", serveToken)
	page := `<!doctype html><title>evil</title><body><script>
const url = ` + strconv.Quote(s.url+"/v1/events") + `;
const ev = id => JSON.stringify({specversion: "1.0", id: id, source: "evil", type: "t", partitionkey: "K", objectversion: 1});
const tries = [
  () => fetch(url, {method: "POST", mode: "no-cors", body: ev("text")}),
  () => fetch(url, {method: "POST", mode: "no-cors", body: new Blob([ev("blob")])}),
  () => fetch(url, {method: "POST", mode: "no-cors", body: new URLSearchParams({e: ev("urlencoded")})}),
  () => { const f = new FormData(); f.append("e", ev("multipart")); return fetch(url, {method: "POST", mode: "no-cors", body: f}); },
  () => fetch(url, {method: "POST", headers: {"Content-Type": "application/cloudevents+json"}, body: ev("cors")}),
];
(async () => {
  const res = [];
  for (const f of tries) {
    try { const r = await f(); res.push(r.type); } catch (e) { res.push("blocked"); }
  }
  const d = document.createElement("div"); d.id = "done"; d.textContent = res.join(","); document.body.appendChild(d);
})();
</script></body>`
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, page)
	}))
	defer evil.Close()
	require.NotEqual(t, evil.URL, s.url)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.Flag("disable-dev-shm-usage", true))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.CSS(`#done`))))
	results, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#done`)))
	require.NoError(t, err)
	require.NoError(t, chromedp.Cancel(bctx))
	// The four simple requests were sent (opaque answers); the fifth was
	// stopped by its preflight.
	require.Equal(t, "opaque,opaque,opaque,opaque,blocked", results)

	metrics := scrapeMetrics(t, s.url)
	require.Equal(t, 4.0, metricOf(metrics, `seqbox_gateway_ingest_requests_total{code="415",mode="structured"}`), metrics)
	require.Zero(t, metricOf(metrics, `seqbox_gateway_ingested_events_total{consumer="gateway",mode="structured"}`))
	for _, id := range []string{"text", "blob", "urlencoded", "multipart", "cors"} {
		ids := s.admin(t, "GET", "/v1/admin/audit?source=evil&id="+id, "", 200)["identities"].([]any)
		require.Empty(t, ids, "event %s was queued", id)
	}
}

func scrapeMetrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// metricOf is the value of one series in a Prometheus text exposition, 0
// when absent.
func metricOf(exposition, series string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(exposition)
	if m == nil {
		return 0
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", series, err))
	}
	return f
}
