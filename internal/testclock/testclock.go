// Package testclock is a clock a test moves by hand, for the Now hooks of
// seqbox's configurations (Config.Now, embedded.Config.Now, the server's
// caches): expiries and freshness are then decided by the test, not by
// the scheduler or the wall clock.
package testclock

import (
	"sync"
	"time"
)

// Clock is a time that moves only when Advance moves it. It is safe for
// concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// At returns a Clock that reads t.
func At(t time.Time) *Clock { return &Clock{t: t} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
