package effects

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	uncertainDesc = prometheus.NewDesc("seqbox_effects_uncertain",
		"External calls whose outcome is unknown, waiting for reconciliation.", []string{"consumer", "action"}, nil)
	oldestDesc = prometheus.NewDesc("seqbox_effects_uncertain_oldest_age_seconds",
		"Age of the oldest uncertain external call.", []string{"consumer", "action"}, nil)
)

// Collector exposes the ledger's uncertain calls to Prometheus, read from
// the database at every scrape, with the calls this ledger recorded by
// result (seqbox_effects_calls_total) and how long its reconciliations
// took (seqbox_effects_reconcile_seconds).
type Collector struct {
	l   *Ledger
	now func() time.Time
}

// NewCollector returns a collector over l; register it where /metrics is
// served.
func NewCollector(l *Ledger) *Collector { return &Collector{l: l, now: l.cfg.Now} }

// Describe sends the metrics' descriptions.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- uncertainDesc
	ch <- oldestDesc
	c.l.calls.Describe(ch)
	c.l.reconcileTime.Describe(ch)
}

// Collect reads the uncertain calls and sends their gauges.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.l.calls.Collect(ch)
	c.l.reconcileTime.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	us, err := c.l.Uncertain(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(uncertainDesc, err)
		return
	}
	for _, u := range us {
		ch <- prometheus.MustNewConstMetric(uncertainDesc, prometheus.GaugeValue, float64(u.Count), u.Consumer, u.Action)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, c.now().Sub(u.Oldest).Seconds(), u.Consumer, u.Action)
	}
}
