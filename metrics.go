package seqbox

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Prometheus collectors a Consumer updates (docs/design.md §14).
// Create them once with NewMetrics and register them where you serve
// /metrics; every series is labelled by consumer.
type Metrics struct {
	// Deliveries is the counter seqbox_deliveries_total{consumer,outcome}:
	// committed deliveries by outcome.
	Deliveries *prometheus.CounterVec
	// KeyConflicts is the counter seqbox_key_conflicts_total: retries
	// because another consumer moved the key's version first.
	KeyConflicts *prometheus.CounterVec
	// Gaps is the gauge seqbox_gaps_recorded: the gaps recorded in the
	// store, set by RefreshMetrics.
	Gaps *prometheus.GaugeVec
	// Redrives is the counter seqbox_redrives_total: dead letters redriven.
	Redrives *prometheus.CounterVec
	// MaxBlockAlerts is the counter seqbox_max_block_exceeded_total: keys
	// released because they stayed blocked longer than MaxBlock.
	MaxBlockAlerts *prometheus.CounterVec
	// StaleBeforeBaseline counts stale events whose version is lower than
	// their key's baseline, the first version seen (no FirstVersion
	// configured): they arrived after a later version started the key.
	StaleBeforeBaseline *prometheus.CounterVec
	// CommitLatency is the histogram seqbox_receive_to_commit_seconds: the
	// time from receiving a batch to its commit, in seconds.
	CommitLatency *prometheus.HistogramVec
	// BatchSize is the histogram seqbox_batch_size: deliveries per
	// committed transaction.
	BatchSize *prometheus.HistogramVec
	// HeldMessages is the gauge seqbox_held_messages: messages parked as
	// held, set by RefreshMetrics.
	HeldMessages *prometheus.GaugeVec
	// BlockedKeys is the gauge seqbox_blocked_keys: keys blocked behind a
	// dead letter or a gap, set by RefreshMetrics.
	BlockedKeys *prometheus.GaugeVec
	// OldestStuckAge is the gauge seqbox_oldest_stuck_age_seconds: seconds
	// since the oldest stuck key got stuck (0 when none), set by
	// RefreshMetrics.
	OldestStuckAge *prometheus.GaugeVec
	// DLQSize is the gauge seqbox_dlq_size: open dead letters, set by
	// RefreshMetrics.
	DLQSize *prometheus.GaugeVec
	// InboxRows is the gauge seqbox_inbox_rows: identities in the inbox,
	// rejected envelopes' left out, set by RefreshMetrics.
	InboxRows *prometheus.GaugeVec
	// PurgedRows is the counter seqbox_purged_rows_total: inbox identities
	// retention removed.
	PurgedRows *prometheus.CounterVec
	// ContractFailure is the counter seqbox_contract_failures_total:
	// envelopes rejected as invalid.
	ContractFailure *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them with reg (nil:
// not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	c := []string{"consumer"}
	m := &Metrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_deliveries_total",
			Help: "Deliveries by outcome (applied, duplicate, collision, stale, held, ...)."}, []string{"consumer", "outcome"}),
		KeyConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_key_conflicts_total",
			Help: "Compare-and-set losses on a key version: another consumer advanced it first."}, c),
		Gaps: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seqbox_gaps_recorded",
			Help: "Version gaps recorded in the store (advanced past, expired, skipped or released)."}, c),
		Redrives: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_redrives_total",
			Help: "DLQ messages redriven."}, c),
		MaxBlockAlerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_max_block_exceeded_total",
			Help: "Keys released because they stayed blocked longer than MaxBlock."}, c),
		StaleBeforeBaseline: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_stale_before_baseline_total",
			Help: "Stale events whose version is lower than their key's baseline, the first version seen (no FirstVersion configured): they came after a later version started the key."}, c),
		CommitLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "seqbox_receive_to_commit_seconds",
			Help: "Time from receiving a batch to its commit.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, c),
		BatchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "seqbox_batch_size",
			Help: "Deliveries per transaction.", Buckets: prometheus.ExponentialBuckets(1, 2, 11)}, c),
		HeldMessages: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seqbox_held_messages",
			Help: "Messages parked as held."}, c),
		BlockedKeys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seqbox_blocked_keys",
			Help: "Keys blocked behind a failed message or a gap."}, c),
		OldestStuckAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seqbox_oldest_stuck_age_seconds",
			Help: "Age of the oldest stuck key: since its oldest held or blocked message, or its block, whichever is earlier."}, c),
		DLQSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seqbox_dlq_size",
			Help: "Unresolved messages in the DLQ."}, c),
		InboxRows: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seqbox_inbox_rows",
			Help: "Identities held in the inbox."}, c),
		PurgedRows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_purged_rows_total",
			Help: "Inbox identities removed by retention."}, c),
		ContractFailure: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_contract_failures_total",
			Help: "Envelopes rejected as invalid."}, c),
	}
	if reg != nil {
		for _, col := range []prometheus.Collector{m.Deliveries, m.KeyConflicts, m.Gaps, m.Redrives, m.MaxBlockAlerts, m.StaleBeforeBaseline,
			m.CommitLatency, m.BatchSize, m.HeldMessages, m.BlockedKeys, m.OldestStuckAge, m.DLQSize, m.InboxRows,
			m.PurgedRows, m.ContractFailure} {
			reg.MustRegister(col)
		}
	}
	return m
}
