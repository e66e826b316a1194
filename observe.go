package seqbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// observe counts results committed at now (one batch's, or one
// Deliver's).
func observe(m *Metrics, consumer string, results []seqboxtype.Result, now time.Time) {
	if m == nil {
		return
	}
	var perKey map[string]int
	for _, res := range results {
		m.Deliveries.WithLabelValues(consumer, string(res.Outcome)).Inc()
		if res.Attempt > 1 {
			m.Redelivered.WithLabelValues(consumer, string(res.Outcome)).Inc()
		}
		if res.PartitionKey != "" {
			if perKey == nil {
				perKey = map[string]int{}
			}
			perKey[res.PartitionKey]++
		}
		if !res.Published.IsZero() && concludes(res.Outcome) {
			// Once an event: at the outcome that concludes it, not at a
			// copy's, a retry's or a hold's.
			if !res.Occurred.IsZero() {
				m.OccurrenceToPublication.WithLabelValues(consumer).Observe(lag(res.Occurred, res.Published))
			}
			m.PublicationToCommit.WithLabelValues(consumer).Observe(lag(res.Published, now))
		}
		switch res.Outcome {
		case seqboxtype.Rejected:
			m.ContractFailure.WithLabelValues(consumer).Inc()
			if res.Source == "" || res.ID == "" {
				m.Unidentified.WithLabelValues(consumer).Inc()
			}
		case seqboxtype.Retry:
			if res.KeyConflict {
				m.KeyConflicts.WithLabelValues(consumer).Inc()
			}
		case seqboxtype.Stale:
			if res.BeforeBaseline {
				m.StaleBeforeBaseline.WithLabelValues(consumer).Inc()
			}
		}
	}
	for _, n := range perKey {
		m.KeyMessages.WithLabelValues(consumer).Observe(float64(n))
	}
}

// concludes reports whether outcome o concludes its identity for the first
// time: not a copy's (duplicate), nor one that waits (retry, held,
// blocked).
func concludes(o seqboxtype.Outcome) bool {
	switch o {
	case seqboxtype.Duplicate, seqboxtype.Retry, seqboxtype.Held, seqboxtype.Blocked:
		return false
	}
	return true
}

// lag is the seconds from to to, 0 when the clocks put to first.
func lag(from, to time.Time) float64 {
	return max(to.Sub(from).Seconds(), 0)
}

// refresh sets the gauges from the store's counts at now.
func refresh(m *Metrics, consumer string, c store.Counts, now time.Time) {
	if m == nil {
		return
	}
	m.HeldMessages.WithLabelValues(consumer).Set(float64(c.Held))
	m.BlockedKeys.WithLabelValues(consumer).Set(float64(c.BlockedKeys))
	m.DLQSize.WithLabelValues(consumer).Set(float64(c.DeadLetters))
	m.InboxRows.WithLabelValues(consumer).Set(float64(c.InboxRows))
	m.Gaps.WithLabelValues(consumer).Set(float64(c.Gaps))
	m.ActiveKeys.WithLabelValues(consumer).Set(float64(c.Keys))
	m.RetryingKeys.WithLabelValues(consumer).Set(float64(c.RetryingKeys))
	age := 0.0
	if !c.OldestStuck.IsZero() {
		age = now.Sub(c.OldestStuck).Seconds()
	}
	m.OldestStuckAge.WithLabelValues(consumer).Set(age)
}

// batchDone counts a committed batch of n and its latency.
func batchDone(m *Metrics, consumer string, n int, since time.Time) {
	if m == nil {
		return
	}
	m.BatchSize.WithLabelValues(consumer).Observe(float64(n))
	m.CommitLatency.WithLabelValues(consumer).Observe(time.Since(since).Seconds())
}

// RefreshMetrics sets the gauges of Config.Metrics (held messages,
// blocked keys, age of the oldest stuck message, DLQ size, inbox rows,
// gaps, active and retrying keys) from the store; without Metrics it does nothing. Run refreshes
// them every 15 seconds (less often when counting takes long), Maintain
// once; a program that serves /metrics may also refresh them on each
// scrape.
func (c *Consumer) RefreshMetrics(ctx context.Context) error {
	if c.cfg.Metrics == nil {
		return nil
	}
	counts, err := c.cfg.Store.Executor().Counts(ctx, c.cfg.Name)
	if err != nil {
		return err
	}
	refresh(c.cfg.Metrics, c.cfg.Name, counts, c.cfg.Now())
	return nil
}

// observe counts results and tells the Observer, after their commit.
func (c *Consumer) observe(results []seqboxtype.Result) {
	observe(c.cfg.Metrics, c.cfg.Name, results, c.cfg.Now())
	c.logResults(results)
	if c.cfg.Observer != nil {
		for _, res := range results {
			c.cfg.Observer(res)
		}
	}
}

// logResults writes one line per committed result an operator should hear
// of: a retry, a dead letter, a rejected envelope, a collision. Each names
// the event (consumer, source, id, key, version, attempt) and the reason.
func (c *Consumer) logResults(results []seqboxtype.Result) {
	for _, res := range results {
		var level slog.Level
		var msg string
		switch res.Outcome {
		case seqboxtype.Retry:
			level, msg = slog.LevelWarn, "seqbox: delivery failed; it will be retried"
		case seqboxtype.DeadLettered:
			level, msg = slog.LevelError, "seqbox: dead-lettered; its key is blocked unless OnDeadLetter is release"
		case seqboxtype.Rejected:
			level, msg = slog.LevelWarn, "seqbox: envelope rejected and dead-lettered"
		case seqboxtype.Collision:
			level, msg = slog.LevelWarn, "seqbox: identity collision: same id, another payload; parked for investigation"
		default:
			continue
		}
		version := any(nil)
		if res.ObjectVersion != nil {
			version = *res.ObjectVersion
		}
		c.cfg.Logger.Log(context.Background(), level, msg, "consumer", c.cfg.Name, "source", res.Source, "id", res.ID,
			"key", res.PartitionKey, "version", version, "attempt", res.Attempt, "outcome", string(res.Outcome), "reason", res.Reason)
	}
}
