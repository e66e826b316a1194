package seqbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// observe counts committed results.
func observe(m *Metrics, consumer string, results []seqboxtype.Result) {
	if m == nil {
		return
	}
	for _, res := range results {
		m.Deliveries.WithLabelValues(consumer, string(res.Outcome)).Inc()
		switch res.Outcome {
		case seqboxtype.Rejected:
			m.ContractFailure.WithLabelValues(consumer).Inc()
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
// gaps) from the store; without Metrics it does nothing. Run refreshes
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
	observe(c.cfg.Metrics, c.cfg.Name, results)
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
