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
	// Unidentified is the counter seqbox_unidentified_total: envelopes
	// rejected with no readable source or id, whose producer cannot be
	// told a duplicate from a new event.
	Unidentified *prometheus.CounterVec
	// Redelivered is the counter seqbox_redelivered_total{consumer,outcome}:
	// broker redeliveries (a delivery attempt above 1) settled, by the
	// outcome they reached; duplicate is a copy the inbox absorbed.
	Redelivered *prometheus.CounterVec
	// ActiveKeys is the gauge seqbox_active_keys: the partition keys the
	// consumer keeps a version or state for, set by RefreshMetrics.
	ActiveKeys *prometheus.GaugeVec
	// RetryingKeys is the gauge seqbox_retrying_keys: keys whose message
	// failed and waits to be tried again (its successors wait behind it),
	// set by RefreshMetrics.
	RetryingKeys *prometheus.GaugeVec
	// KeyMessages is the histogram seqbox_key_messages_per_batch: how many
	// of a committed batch's deliveries each of its keys had, which shows
	// the distribution of messages over keys (a hot key stands out).
	KeyMessages *prometheus.HistogramVec
	// OccurrenceToPublication is the histogram
	// seqbox_occurrence_to_publication_seconds: from the event's time (when
	// the fact happened) to its publication (its publishedat attribute, or
	// the broker's publish time), for events that carry both.
	OccurrenceToPublication *prometheus.HistogramVec
	// PublicationToCommit is the histogram
	// seqbox_publication_to_commit_seconds: from the event's publication
	// (as OccurrenceToPublication reads it) to the commit of the outcome
	// that concludes it (once an event: not a copy's, a retry's or a
	// hold's; OccurrenceToPublication likewise).
	PublicationToCommit *prometheus.HistogramVec
}

// lagBuckets are the lag histograms' buckets: 1 ms to about 9 hours.
var lagBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 18)

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
		Unidentified: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_unidentified_total",
			Help: "Envelopes rejected with no readable source or id: their producer sends events seqbox cannot identify."}, c),
		Redelivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_redelivered_total",
			Help: "Broker redeliveries (delivery attempt above 1) settled, by outcome; duplicate is a copy the inbox absorbed."}, []string{"consumer", "outcome"}),
		ActiveKeys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seqbox_active_keys",
			Help: "Partition keys the consumer keeps a version or state for."}, c),
		RetryingKeys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seqbox_retrying_keys",
			Help: "Keys whose message failed and waits to be tried again; their successors wait behind it."}, c),
		KeyMessages: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "seqbox_key_messages_per_batch",
			Help: "Deliveries of one key in one committed batch: the distribution of messages over keys.", Buckets: prometheus.ExponentialBuckets(1, 2, 11)}, c),
		OccurrenceToPublication: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "seqbox_occurrence_to_publication_seconds",
			Help: "From an event's time to its publication (publishedat, or the broker's publish time).", Buckets: lagBuckets}, c),
		PublicationToCommit: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "seqbox_publication_to_commit_seconds",
			Help: "From an event's publication (publishedat, or the broker's publish time) to the commit of its outcome.", Buckets: lagBuckets}, c),
	}
	if reg != nil {
		for _, col := range []prometheus.Collector{m.Deliveries, m.KeyConflicts, m.Gaps, m.Redrives, m.MaxBlockAlerts, m.StaleBeforeBaseline,
			m.CommitLatency, m.BatchSize, m.HeldMessages, m.BlockedKeys, m.OldestStuckAge, m.DLQSize, m.InboxRows,
			m.PurgedRows, m.ContractFailure, m.Unidentified, m.Redelivered, m.ActiveKeys, m.RetryingKeys, m.KeyMessages,
			m.OccurrenceToPublication, m.PublicationToCommit} {
			reg.MustRegister(col)
		}
	}
	return m
}
