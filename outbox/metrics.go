package outbox

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	publishedDesc = prometheus.NewDesc("seqbox_outbox_published_total",
		"Outbox events the relay published and marked published.", []string{"relay"}, nil)
	refusedDesc = prometheus.NewDesc("seqbox_outbox_refused_total",
		"Publish attempts the publisher refused; the refused event's key backs off.", []string{"relay"}, nil)
	prunedDesc = prometheus.NewDesc("seqbox_outbox_pruned_total",
		"Published outbox events the relay removed once Config.Keep had passed.", []string{"relay"}, nil)
	pendingDesc = prometheus.NewDesc("seqbox_outbox_pending",
		"Outbox events not yet published.", []string{"relay"}, nil)
	oldestPendingDesc = prometheus.NewDesc("seqbox_outbox_pending_oldest_age_seconds",
		"Age of the oldest outbox event not yet published.", []string{"relay"}, nil)
	refusedKeysDesc = prometheus.NewDesc("seqbox_outbox_refused_keys",
		"Partition keys held up by an event the publisher refused (see Relay.Refusals).", []string{"relay"}, nil)
	refusedAttemptsDesc = prometheus.NewDesc("seqbox_outbox_refused_max_attempts",
		"Most refusals of one event still unpublished.", []string{"relay"}, nil)
)

// Collector exposes a relay to Prometheus: its counters, and the outbox's
// backlog and refused keys, read from the database at every scrape.
type Collector struct{ r *Relay }

// NewCollector returns a collector over r; register it where /metrics is
// served.
func NewCollector(r *Relay) *Collector { return &Collector{r: r} }

// Describe sends the metrics' descriptions.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{publishedDesc, refusedDesc, prunedDesc, pendingDesc, oldestPendingDesc, refusedKeysDesc, refusedAttemptsDesc} {
		ch <- d
	}
}

// Collect sends the relay's counters and reads the outbox's gauges.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	name := c.r.cfg.Name
	st := c.r.Stats()
	ch <- prometheus.MustNewConstMetric(publishedDesc, prometheus.CounterValue, float64(st.Published), name)
	ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(st.Refused), name)
	ch <- prometheus.MustNewConstMetric(prunedDesc, prometheus.CounterValue, float64(st.Pruned), name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, age, err := c.r.backlog(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(pendingDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(b.Pending), name)
	ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, age.Seconds(), name)
	ch <- prometheus.MustNewConstMetric(refusedKeysDesc, prometheus.GaugeValue, float64(b.RefusedKeys), name)
	ch <- prometheus.MustNewConstMetric(refusedAttemptsDesc, prometheus.GaugeValue, float64(b.MaxAttempts), name)
}
