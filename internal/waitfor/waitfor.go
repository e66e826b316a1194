// Package waitfor is how tests wait for something that happens in another
// goroutine, process or broker and offers no signal of its own: they poll
// the real condition (a row count, an offset, a broker's state) often,
// under a generous deadline that exists only to turn a hang into a
// failure. The deadline is not a claim about how fast anything is; a test
// never sleeps to let something happen, and never asserts an elapsed
// time.
package waitfor

import (
	"testing"
	"time"
)

// Tick is how often a condition is polled.
const Tick = 20 * time.Millisecond

// Until polls cond every Tick until it holds, for at most within, and
// reports whether it held: for a caller that must clean up before it
// fails, or that has no testing.TB (a child process).
func Until(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(Tick)
	}
	return true
}

// That fails t unless cond holds within within; what names the condition
// in the failure.
func That(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(within, cond) {
		t.Fatalf("timed out after %s waiting for %s", within, what)
	}
}
