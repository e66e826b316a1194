// Package browsertest starts headless Chromium for the dashboard's tests.
package browsertest

import (
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// Chromium finds the browser: $SEQBOX_CHROMIUM (what .ci/chromium-install
// prints), else Chromium on the PATH. With CI set a missing browser fails
// the test; elsewhere it skips, saying how to install it.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SEQBOX_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("SEQBOX_CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed: the dashboard's browser tests must run in CI (.ci/chromium-install installs it)")
	}
	t.Skip("chromium is not installed; run .ci/chromium-install (Debian: apt-get install chromium) or set SEQBOX_CHROMIUM")
	return ""
}

// Options are how the tests run the browser at path: headless, in a
// 1400×1000 window, without /dev/shm, and without the sandbox as root.
func Options(path string) []chromedp.ExecAllocatorOption {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-dev-shm-usage", true))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	return opts
}
