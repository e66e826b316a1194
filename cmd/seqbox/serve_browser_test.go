package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/browsertest"
)

// chromium finds the browser (browsertest.Chromium): in CI a missing
// browser fails the test.
func chromium(t *testing.T) string { return browsertest.Chromium(t) }

// The dashboard end to end in headless Chromium: an agent refuses an
// event, so its key blocks with a successor parked behind it; the agent
// is fixed; the operator opens /ui/, enters the admin token, sees the
// blocked key, clicks redrive, says who and why, and sees the key clear.
// The screenshot goes to $SEQBOX_SCREENSHOT when set (the README's).
func TestServeDashboardInBrowser(t *testing.T) {
	browser := chromium(t)
	var broken atomic.Bool
	broken.Store(true)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() && r.Header.Get("Seqbox-Partition-Key") == "PED-4821" && r.Header.Get("Seqbox-Object-Version") == "1" {
			http.Error(w, `{"title":"unknown customer"}`, http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer agent.Close()
	s := startServe(t, nil, "--db", filepath.Join(t.TempDir(), "seqbox.db"), "--admin-token", serveToken, "--agent-url", agent.URL)
	s.event(t, ce("ord-1", "PED-4821", 1, `{"status":"created"}`))
	s.event(t, ce("ord-2", "PED-4821", 2, `{"status":"paid"}`))
	s.event(t, ce("ok-1", "PED-1000", 1, `{"status":"created"}`))
	waitUntil(t, "PED-4821 blocked with ord-2 behind it", func() bool { return s.outcome(t, "ord-2") == "blocked" })
	broken.Store(false)

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), browsertest.Options(browser)...)
	defer cancelAlloc()
	bctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()

	type css = chromedp.CSS
	row := `#stuck-keys tbody tr[data-key="PED-4821"]`
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
		require.NoError(t, err, "text of %s", sel)
		return v
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.url+"/ui/"),
		chromedp.WaitVisible(css(`#token`)),
		chromedp.SendKeys(css(`#token`), serveToken),
		chromedp.Click(css(`#login-button`)),
		chromedp.WaitVisible(css(row)),
		chromedp.WaitVisible(css(`#dlq tbody tr`)),
	)
	require.NoError(t, err, "serve stderr: %s", s.stderrText())
	require.Equal(t, "blocked", text(row+` td:nth-child(2)`))
	require.Equal(t, "1", text(row+` td:nth-child(3)`), "expected version")
	require.Equal(t, "2", text(row+` td:nth-child(4)`), "received version")
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NotEmpty(t, shot)
	if p := os.Getenv("SEQBOX_SCREENSHOT"); p != "" {
		require.NoError(t, os.WriteFile(p, shot, 0o644))
	}

	err = chromedp.Do(ctx,
		chromedp.Click(css(row+` button.redrive`)),
		chromedp.WaitVisible(css(`#action-dialog`)),
		chromedp.SendKeys(css(`#action-by`), "ops"),
		chromedp.SendKeys(css(`#action-reason`), "customer created"),
		chromedp.Click(css(`#action-confirm`)),
		chromedp.WaitNotPresent(css(row)),
		chromedp.WaitVisible(css(`#stuck-empty`)),
	)
	if err != nil {
		sctx, cancel := context.WithTimeout(bctx, 5*time.Second)
		defer cancel()
		status, _ := chromedp.Run(sctx, chromedp.Text(css(`#status`)))
		t.Fatalf("%v\nstatus %q\nkeys %v\ndlq %v\nserve stderr: %s", err, status, s.admin(t, "GET", "/v1/admin/keys", "", 200),
			s.admin(t, "GET", "/v1/admin/dlq?all=true", "", 200), s.stderrText())
	}
	require.Contains(t, text(`#status`), "redrive of dead letter 1 done (applied, applied), by ops")
	require.Equal(t, "applied", s.outcome(t, "ord-1"))
	require.Equal(t, "applied", s.outcome(t, "ord-2"))
	require.NoError(t, chromedp.Cancel(bctx))
}
