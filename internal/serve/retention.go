package serve

import (
	"context"
	"sync"
	"time"
)

// retentionStatus is what the last retention run did.
type retentionStatus struct {
	mu            sync.Mutex
	lastRun       time.Time
	lastErr       string
	lastInbox     int64
	lastEnvelopes int64
	totalInbox    int64
	nextRun       time.Time
}

// Retention is GET /v1/admin/retention.
type Retention struct {
	Consumer string `json:"consumer"`
	// The windows docs/design.md §13 validates: Retention must cover the broker's
	// redelivery window, and DLQ retention plus the redrive window.
	Retention        string  `json:"retention"`
	RedeliveryWindow string  `json:"redelivery_window"`
	DLQRetention     string  `json:"dlq_retention"`
	RedriveWindow    string  `json:"redrive_window"`
	PurgeEvery       string  `json:"purge_every"`
	LastRunAt        *string `json:"last_run_at"`
	LastRunError     string  `json:"last_run_error"`
	// LastPurgedInbox and LastPurgedEnvelopes count what the last run
	// removed; PurgedInboxTotal what every run of this process removed.
	LastPurgedInbox     int64   `json:"last_purged_inbox"`
	LastPurgedEnvelopes int64   `json:"last_purged_envelopes"`
	PurgedInboxTotal    int64   `json:"purged_inbox_total"`
	NextRunAt           *string `json:"next_run_at"`
	InboxRows           int64   `json:"inbox_rows"`
}

// retentionLoop purges the inbox (seqbox.Consumer.Purge: small batches,
// each its own short transaction, never held or blocked identities) and
// the gateway's envelopes every PurgeEvery, until ctx ends.
func (s *Server) retentionLoop(ctx context.Context) {
	if s.opt.PurgeEvery < 0 {
		return
	}
	for {
		s.retention.mu.Lock()
		s.retention.nextRun = time.Now().Add(s.opt.PurgeEvery)
		s.retention.mu.Unlock()
		t := time.NewTimer(s.opt.PurgeEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		s.purge(ctx)
	}
}

// purge runs retention once.
func (s *Server) purge(ctx context.Context) {
	n, err := s.consumer.Purge(ctx, 0)
	var env int64
	if err == nil {
		now := s.consumerNow()
		ret := s.opt.Policy.Retention
		env, err = purgeEnvelopes(ctx, s.store.Executor(), s.opt.Consumer, now.Add(-ret), now.Add(-ret), now, 500)
		if env > 0 {
			s.envelopes.tombstones.Store(true)
		}
	}
	result := "ok"
	st := s.retention
	st.mu.Lock()
	st.lastRun, st.lastInbox, st.lastEnvelopes, st.lastErr = time.Now(), n, env, ""
	st.totalInbox += n
	if err != nil && ctx.Err() == nil {
		st.lastErr, result = err.Error(), "error"
		s.opt.Logger.Warn("seqbox serve: retention run failed", "err", err)
	}
	st.mu.Unlock()
	s.metrics.purgeRuns.WithLabelValues(s.opt.Consumer, result).Inc()
}

func (s *Server) retentionView(ctx context.Context) (Retention, error) {
	p := s.opt.Policy
	st := s.retention
	st.mu.Lock()
	v := Retention{Consumer: s.opt.Consumer, Retention: p.Retention.String(), RedeliveryWindow: p.RedeliveryWindow.String(),
		DLQRetention: p.DLQRetention.String(), RedriveWindow: p.RedriveWindow.String(), PurgeEvery: s.opt.PurgeEvery.String(),
		LastRunAt: stamp(st.lastRun), LastRunError: st.lastErr, LastPurgedInbox: st.lastInbox,
		LastPurgedEnvelopes: st.lastEnvelopes, PurgedInboxTotal: st.totalInbox, NextRunAt: stamp(st.nextRun)}
	st.mu.Unlock()
	if s.opt.PurgeEvery < 0 {
		v.PurgeEvery, v.NextRunAt = "never", nil
	}
	c, _, err := s.counts(ctx)
	v.InboxRows = c.InboxRows
	return v, err
}

func stamp(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}
