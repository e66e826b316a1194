package seqbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/seqbox/seqbox/internal/heartbeat"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// requestsEvery is how often Run looks for operator requests.
const requestsEvery = 250 * time.Millisecond

// RunRequests executes the pending operator requests addressed to this
// consumer (docs/design.md §9): a redrive, skip or release that the CLI or
// the admin API recorded runs here, through this consumer's own pipeline
// and handler, and its results are recorded on the request. It returns how
// many requests it executed; a request another process took first is left
// to it. Run looks for requests every 250 ms and Maintain once; a consumer
// driven by Deliver calls one of them.
func (c *Consumer) RunRequests(ctx context.Context) (int, error) {
	ctl := c.cfg.Store.Executor()
	if err := c.abandonSilent(ctx); err != nil {
		return 0, err
	}
	reqs, err := ctl.RequestListPending(ctx, c.cfg.Name)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range reqs {
		ok, err := ctl.RequestClaim(ctx, store.RequestClaimParams{Seq: r.Seq, Taker: c.process, At: time.Now()})
		if err != nil {
			return n, err
		}
		if !ok {
			continue
		}
		results, aerr := c.executeAlive(ctx, r)
		st, errText := seqboxtype.RequestDone, ""
		if aerr != nil {
			st, errText = seqboxtype.RequestFailed, aerr.Error()
			if ctx.Err() != nil {
				errText = "the consumer shut down before the request finished (" + errText + "); run the command again"
			}
		}
		if results == nil {
			results = []seqboxtype.Result{}
		}
		result, err := json.Marshal(results)
		if err != nil {
			return n, err
		}
		if err := ctl.RequestFinish(context.WithoutCancel(ctx), store.RequestFinishParams{Seq: r.Seq, State: st, Result: result, Error: errText, At: time.Now()}); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				// Abandoned while it ran: the request says so, and this
				// log says what the action reached.
				c.cfg.Logger.Warn("seqbox: an operator request finished after it was abandoned; its result is only logged",
					"consumer", c.cfg.Name, "request", r.Seq, "action", r.Action, "target", r.Target, "state", st,
					"result", string(result), "err", errText)
				continue
			}
			return n, fmt.Errorf("record the result of operator request %d: %w", r.Seq, err)
		}
		n++
		c.cfg.Logger.Info("seqbox: operator request executed", "consumer", c.cfg.Name, "request", r.Seq,
			"action", r.Action, "target", r.Target, "by", r.RequestedBy, "reason", r.Reason, "state", st, "err", errText)
	}
	return n, nil
}

// executeAlive runs request r's action while renewing its sign of life
// every heartbeat, and this consumer's registration with it (a long
// request holds the control loop that renews it otherwise). Should the
// request be abandoned meanwhile (its renewals came too late), the
// action is cancelled: the request says it failed, and the operator may
// run it again.
func (c *Consumer) executeAlive(ctx context.Context, r store.OperatorRequest) ([]seqboxtype.Result, error) {
	ctl := c.cfg.Store.Executor()
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var once sync.Once
	// Renewed until the action returns, whatever ctx does: a shutdown
	// lets it finish its transaction.
	stop := heartbeat.Start(context.WithoutCancel(ctx), HeartbeatEvery, func(hctx context.Context) {
		now := time.Now()
		ok, err := ctl.RequestAlive(hctx, store.RequestAliveParams{Seq: r.Seq, Taker: c.process, At: now})
		if err == nil && !ok {
			once.Do(func() {
				c.cfg.Logger.Warn("seqbox: an operator request this process runs was abandoned meanwhile (its sign of life came too late); its action is cancelled",
					"consumer", c.cfg.Name, "request", r.Seq, "action", r.Action, "target", r.Target)
				cancel(errAbandoned)
			})
		}
		_ = ctl.ConsumerHeartbeat(hctx, store.ConsumerHeartbeatParams{Consumer: c.cfg.Name, At: now})
	})
	defer stop()
	return c.execute(actx, r)
}

// errAbandoned cancels the action of a request abandoned while it ran.
var errAbandoned = errors.New("the request was abandoned while it ran: its sign of life came too late")

// sighting is a running request's sign of life as this consumer last saw
// it change, by its own clock.
type sighting struct {
	alive, since time.Time
}

// abandonSilent fails the consumer's running requests whose taker has
// shown no sign of life for LiveWithin (three heartbeats): a process
// killed or frozen while it ran one left it running for good, and the CLI
// waiting for it said it "may still finish". It is failed, not run again:
// a taker that died running it may have died of it. Silence is measured
// on this consumer's clock, from when it saw the request's sign of life
// last change: another host's clock, or a renewal that waited for the
// writer, cannot make a live taker look dead. A request taken by a seqbox
// that kept no sign of life is left as it was. At most once a heartbeat;
// a read, and a write only to fail one.
func (c *Consumer) abandonSilent(ctx context.Context) error {
	now := c.cfg.Now()
	c.sightMu.Lock()
	defer c.sightMu.Unlock()
	if !c.sightAt.IsZero() && now.Sub(c.sightAt) < HeartbeatEvery {
		return nil
	}
	c.sightAt = now
	ctl := c.cfg.Store.Executor()
	running, err := ctl.RequestListRunning(ctx, c.cfg.Name)
	if err != nil {
		return err
	}
	seen := make(map[int64]sighting, len(running))
	for _, r := range running {
		if r.AliveAt.IsZero() {
			continue
		}
		s, ok := c.sightings[r.Seq]
		if !ok || !s.alive.Equal(r.AliveAt) {
			seen[r.Seq] = sighting{alive: r.AliveAt, since: now}
			continue
		}
		if silent := now.Sub(s.since); silent >= LiveWithin {
			gone, err := ctl.RequestAbandon(ctx, store.RequestAbandonParams{Seq: r.Seq, AliveAt: r.AliveAt, Silent: silent, At: now})
			if err != nil {
				return err
			}
			if gone {
				c.cfg.Logger.Warn("seqbox: an operator request's taker fell silent while it ran it; the request is failed",
					"consumer", c.cfg.Name, "request", r.Seq, "action", r.Action, "target", r.Target, "taken_by", r.TakenBy,
					"alive_at", r.AliveAt, "silent_for", silent.Round(time.Second))
				continue
			}
		}
		seen[r.Seq] = s
	}
	c.sightings = seen
	return nil
}

// execute runs one request's action through the pipeline.
func (c *Consumer) execute(ctx context.Context, r store.OperatorRequest) ([]seqboxtype.Result, error) {
	switch r.Action {
	case store.ActionRedrive, store.ActionSkip:
		seq, err := strconv.ParseInt(r.Target, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: target %q is not a DLQ sequence number", r.Action, r.Target)
		}
		if r.Action == store.ActionSkip {
			return c.Skip(ctx, seq, r.RequestedBy, r.Reason)
		}
		return c.redriveUntilFinal(ctx, seq)
	case store.ActionRelease:
		return c.ReleaseKey(ctx, r.Target, r.RequestedBy, r.Reason)
	}
	return nil, fmt.Errorf("unknown action %q", r.Action)
}

// redriveUntilFinal redrives DLQ message seq, and again while it fails
// transiently, up to the retry policy's attempts: with its backoff (or a
// longer Retry-After) in a running consumer, at once for the record
// handler (as replay does).
func (c *Consumer) redriveUntilFinal(ctx context.Context, seq int64) ([]seqboxtype.Result, error) {
	var out []seqboxtype.Result
	for attempt := 1; ; attempt++ {
		results, err := c.Redrive(ctx, seq)
		if err != nil {
			if len(out) > 0 && errors.Is(err, ErrNotBlocking) {
				err = nil // concluded by an earlier attempt's unparking
			}
			return out, err
		}
		out = append(out, results...)
		if len(results) == 0 || results[0].Outcome != seqboxtype.Retry || attempt >= c.cfg.Retry.MaxAttempts {
			return out, nil
		}
		if c.kind != store.HandlerRecord {
			// The policy's backoff, or what the remote side asked for
			// (Retry-After, within the cap), whichever is longer: as a
			// delivery's retry waits.
			sleep(ctx, max(c.cfg.Retry.Backoff(attempt), results[0].RetryAfter))
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
		}
	}
}

// controlLoop keeps the registration's heartbeat fresh and executes
// operator requests until ctx ends.
func (c *Consumer) controlLoop(ctx context.Context) {
	t := time.NewTicker(requestsEvery)
	defer t.Stop()
	beat := time.Now()
	for {
		select {
		case <-ctx.Done():
			c.markStopped(ctx)
			return
		case <-t.C:
		}
		if !c.registered.Load() {
			if err := c.register(ctx, true); err != nil {
				continue // logged once by Run; requests wait for the registration
			}
			beat = time.Now()
		}
		if time.Since(beat) >= heartbeatEvery {
			beat = time.Now()
			if err := c.cfg.Store.Executor().ConsumerHeartbeat(ctx, store.ConsumerHeartbeatParams{Consumer: c.cfg.Name, At: beat}); err != nil && ctx.Err() == nil {
				c.cfg.Logger.Warn("seqbox: heartbeat failed", "consumer", c.cfg.Name, "err", err)
			}
		}
		if _, err := c.RunRequests(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("seqbox: operator requests failed", "consumer", c.cfg.Name, "err", err)
		}
	}
}
