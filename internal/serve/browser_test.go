package serve

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/browsertest"
)

// browser is a headless Chromium tab for one test; every step runs under
// a deadline that only turns a hang into a failure.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// newBrowser starts Chromium for t; it is closed when the test ends.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), browsertest.Options(browsertest.Chromium(t))...)
	bctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	t.Cleanup(func() {
		cancel()
		_ = chromedp.Cancel(bctx) // closes the browser; a failed test may have lost it already
		cancelCtx()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: ctx}
	// Start it now: the cleanup waits for a browser that was started.
	b.do("start chromium", chromedp.Navigate("about:blank"))
	return b
}

// do runs steps, failing the test with what (and the page's status line)
// when one fails.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// text is the visible text of the first element sel matches, read in one
// step (the page redraws parts when their data changes), once there is
// one.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return b.read(sel, `e.innerText ?? e.textContent`)
}

// attr is an attribute of the first element sel matches ("" when absent).
func (b *browser) attr(sel, name string) string {
	b.t.Helper()
	return b.read(sel, `e.getAttribute(`+strconv.Quote(name)+`) ?? ""`)
}

// read waits for an element sel matches and returns expr of it (e).
func (b *browser) read(sel, expr string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.PollFunction[[]string](`(sel) => {
		const e = document.querySelector(sel);
		return e ? [`+expr+`] : false;
	}`, chromedp.WithPollingArgs(sel), chromedp.WithPollingMutation()))
	require.NoError(b.t, err, "reading %s of %s", expr, sel)
	return v[0]
}

// fill empties the input sel matches and types text into it.
func fill(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.Evaluate[chromedp.Void](`document.querySelector(`+strconv.Quote(sel)+`).value = ""`),
		chromedp.SendKeys(chromedp.CSS(sel), text))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.t, err, "evaluate %s", expr)
	return v
}

// shot keeps a PNG of the whole page as name.png: in the test's artifact
// directory (kept with go test -artifacts) and, when $SEQBOX_SCREENSHOTS
// names a directory, there too.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err, "screenshot %s", name)
	b.keep(name, png)
}

// shotOf keeps a PNG of the first element sel matches, as shot does.
func (b *browser) shotOf(name, sel string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	require.NoError(b.t, err, "screenshot %s of %s", name, sel)
	b.keep(name, png)
}

func (b *browser) keep(name string, png []byte) {
	b.t.Helper()
	require.NotEmpty(b.t, png)
	dirs := []string{b.t.ArtifactDir()}
	if d := os.Getenv("SEQBOX_SCREENSHOTS"); d != "" {
		require.NoError(b.t, os.MkdirAll(d, 0o755))
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		require.NoError(b.t, os.WriteFile(filepath.Join(d, name+".png"), png, 0o644))
	}
}
