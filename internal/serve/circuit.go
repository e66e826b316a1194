package serve

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// circuit pauses dispatch while the agent as a whole is down (docs/design.md
// §10.3). It opens after circuitThreshold calls in a row failed the way a
// down agent fails (refused or reset connections, timeouts, 5xx); a
// Retry-After never opens it (that delays its event's key only). While it
// is open, dispatches wait in the gateway instead of spending their
// messages' attempts. After each pause it is half-open: one waiter first
// probes with a HEAD request (probe, which no message pays for), and a
// failed probe opens it again for a longer pause, up to circuitMaxPause;
// a probe that passes lets that waiter's real call through as the trial,
// while every other dispatch keeps waiting. Only the trial's success
// closes the circuit; its failure opens it again for a longer pause. A
// HEAD that answers while POST fails therefore closes nothing, and a
// deploy's restart of the agent fills no DLQ.
type circuit struct {
	mu   sync.Mutex
	open bool
	// trial: a waiter is probing, or its call is the trial.
	trial bool
	// failures counts the down-agent failures in a row while closed.
	failures int
	// gen counts the openings: a pass from before the last one reports
	// nothing (its failure is not news, its success not a trial's).
	gen uint64
	// until is when the next trial may go; pause is the current pause.
	until time.Time
	pause time.Duration
	// changed is closed and replaced whenever the state changes.
	changed chan struct{}
	// onChange is told every change (the log line and the gauge).
	onChange func(open bool, why string, pause time.Duration)
	// probe asks whether the agent is up: nil when it answered. Nil:
	// the trial goes without a probe.
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

// pass is one dispatch let through by wait. The dispatch reports what its
// call showed about the agent (success, failure) or nothing (release);
// release after a report does nothing, so it may be deferred.
type pass struct {
	c     *circuit
	gen   uint64
	trial bool
	done  bool
}

// wait returns when a dispatch may go: at once while the circuit is
// closed; while it is open, when the pause is over, no other trial is out
// and the probe passed, as the trial, or once a trial closed it. It fails
// only when ctx ends.
func (c *circuit) wait(ctx context.Context) (*pass, error) {
	for {
		c.mu.Lock()
		if !c.open {
			p := &pass{c: c, gen: c.gen}
			c.mu.Unlock()
			return p, nil
		}
		now := c.now()
		if !c.trial && !now.Before(c.until) {
			c.trial = true
			gen := c.gen
			c.mu.Unlock()
			p := &pass{c: c, gen: gen, trial: true}
			if c.probe != nil {
				err := c.probe(ctx)
				if ctx.Err() != nil {
					p.release()
					return nil, ctx.Err()
				}
				if err != nil {
					p.failure("the probe failed: " + err.Error())
					continue
				}
			}
			return p, nil
		}
		changed, delay, trialOut := c.changed, c.until.Sub(now), c.trial
		c.mu.Unlock()
		if trialOut || delay <= 0 {
			delay = circuitMaxPause // woken by the trial's report
		}
		t := time.NewTimer(delay)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// success records a call whose answer shows the agent is up. The trial's
// closes the circuit; while closed, it resets the count of failures.
func (p *pass) success() {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.done || p.gen != c.gen {
		p.done = true
		return
	}
	p.done = true
	switch {
	case p.trial:
		c.open, c.trial, c.failures, c.pause = false, false, 0, 0
		c.notify(false, "a call to the agent succeeded again", 0)
	case !c.open:
		c.failures = 0
	}
}

// failure records a failure that a down agent gives; why names it. The
// trial's opens the circuit again for a longer pause; while closed, the
// circuitThreshold-th in a row opens it.
func (p *pass) failure(why string) {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.done || p.gen != c.gen {
		p.done = true
		return
	}
	p.done = true
	switch {
	case p.trial:
		c.trial = false
		c.pause = min(2*c.pause, circuitMaxPause)
		c.until = c.now().Add(c.pause)
		c.notify(true, why, c.pause)
	case !c.open:
		c.failures++
		if c.failures >= circuitThreshold {
			c.open, c.gen, c.failures, c.pause = true, c.gen+1, 0, circuitMinPause
			c.until = c.now().Add(c.pause)
			c.notify(true, fmt.Sprintf("%d calls in a row failed; the last: %s", circuitThreshold, why), c.pause)
		}
	}
}

// release ends a pass that made no call, or whose answer says nothing
// about the agent's health (429, 408, a call that never left the
// process): a trial's turn goes to the next waiter at once.
func (p *pass) release() {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	if p.trial && p.gen == c.gen && c.trial {
		c.trial = false
		c.notify(c.open, "", c.pause)
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
				"consumer", consumer, "why", why, "trial_in", pause)
			return
		}
		log.Info("seqbox serve: agent circuit closed: dispatch resumes", "consumer", consumer, "why", why)
	}
}
