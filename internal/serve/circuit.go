package serve

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// circuit pauses dispatch while the agent as a whole is down (docs/design.md §10):
// after circuitThreshold calls in a row failed the way a down agent fails
// (refused or reset connections, timeouts, 5xx), or when the agent asks
// for a pause (429 or 503 with Retry-After), it opens. While it is open,
// dispatches wait in the gateway instead of spending their messages'
// attempts; after each pause one waiter probes the agent (probe: a HEAD
// request, which no message pays for): an answer closes the circuit, a
// failure opens it again for a longer pause, up to circuitMaxPause. A
// deploy's restart of the agent therefore fills no DLQ.
type circuit struct {
	mu      sync.Mutex
	open    bool
	probing bool
	// failures counts the failures in a row while closed.
	failures int
	// until is when the next probe may go; pause is the current pause.
	until time.Time
	pause time.Duration
	// changed is closed and replaced whenever the state changes.
	changed chan struct{}
	// onChange is told every change (the log line and the gauge).
	onChange func(open bool, why string, pause time.Duration)
	// probe asks whether the agent is up: nil when it answered.
	probe func(ctx context.Context) error
	now   func() time.Time
}

const (
	circuitThreshold = 3
	circuitMinPause  = 500 * time.Millisecond
	circuitMaxPause  = 5 * time.Second
)

func newCircuit(now func() time.Time, probe func(context.Context) error, onChange func(open bool, why string, pause time.Duration)) *circuit {
	return &circuit{changed: make(chan struct{}), now: now, probe: probe, onChange: onChange}
}

// wait returns when a dispatch may go: at once while the circuit is
// closed; while it is open, once a probe found the agent up. The waiter
// whose turn it is probes. It fails only when ctx ends.
func (c *circuit) wait(ctx context.Context) error {
	for {
		c.mu.Lock()
		if !c.open {
			c.mu.Unlock()
			return nil
		}
		now := c.now()
		if !c.probing && !now.Before(c.until) {
			c.probing = true
			c.mu.Unlock()
			err := c.probe(ctx)
			if ctx.Err() != nil {
				c.mu.Lock()
				c.probing = false
				c.notify(c.open, "", c.pause)
				c.mu.Unlock()
				return ctx.Err()
			}
			if err == nil {
				c.success()
			} else {
				c.failure(err.Error())
			}
			continue
		}
		changed, delay := c.changed, c.until.Sub(now)
		c.mu.Unlock()
		t := time.NewTimer(max(delay, time.Millisecond))
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// success records an answer that shows the agent is up.
func (c *circuit) success() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures, c.probing = 0, false
	if c.open {
		c.open, c.pause = false, 0
		c.notify(false, "the agent answered again", 0)
	}
}

// failure records a failure that a down agent gives; why names it.
func (c *circuit) failure(why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	wasProbe := c.probing
	c.probing = false
	if c.open {
		// Failures of calls that started before it opened are not news;
		// a probe's failure doubles the pause.
		if wasProbe {
			c.pause = min(2*c.pause, circuitMaxPause)
			c.until = c.now().Add(c.pause)
			c.notify(true, "the probe failed: "+why, c.pause)
		}
		return
	}
	c.failures++
	if c.failures >= circuitThreshold {
		c.open, c.pause = true, circuitMinPause
		c.until = c.now().Add(c.pause)
		c.notify(true, why, c.pause)
	}
}

// pauseFor opens the circuit for d at the agent's request (Retry-After).
func (c *circuit) pauseFor(d time.Duration, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.probing = false
	d = min(max(d, circuitMinPause), time.Minute)
	if until := c.now().Add(d); !c.open || until.After(c.until) {
		c.open, c.pause, c.until = true, min(d, circuitMaxPause), until
		c.notify(true, why, d)
	}
}

// state reports whether the circuit is open and until when it pauses.
func (c *circuit) state() (bool, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.until
}

// notify wakes the waiters and tells onChange; c.mu is held.
func (c *circuit) notify(open bool, why string, pause time.Duration) {
	close(c.changed)
	c.changed = make(chan struct{})
	if c.onChange != nil && why != "" {
		c.onChange(open, why, pause)
	}
}

// logCircuit is the circuit's log line.
func logCircuit(log *slog.Logger, consumer string) func(open bool, why string, pause time.Duration) {
	return func(open bool, why string, pause time.Duration) {
		if open {
			log.Warn("seqbox serve: agent circuit open: dispatch paused, messages keep their attempts",
				"consumer", consumer, "why", why, "probe_in", pause)
			return
		}
		log.Info("seqbox serve: agent circuit closed: dispatch resumes", "consumer", consumer, "why", why)
	}
}
