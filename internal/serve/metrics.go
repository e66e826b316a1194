package serve

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
)

// gatewayMetrics are the gateway's own counters, next to the consumer's
// (seqbox.NewMetrics) and the effect ledger's (effects.NewCollector).
type gatewayMetrics struct {
	ingestRequests *prometheus.CounterVec
	ingestEvents   *prometheus.CounterVec
	ingestRejected *prometheus.CounterVec
	agentCalls     *prometheus.CounterVec
	agentSeconds   *prometheus.HistogramVec
	agentDecisions *prometheus.CounterVec
	adminActions   *prometheus.CounterVec
	purgedEarly    *prometheus.CounterVec
	purgeRuns      *prometheus.CounterVec
	// agentCircuitOpen is 1 while dispatch to the agent is paused.
	agentCircuitOpen *prometheus.GaugeVec
	// tiles gathers the counters the dashboard's tiles read, so that a
	// tile shows the number /metrics does.
	tiles *prometheus.Registry
}

func newGatewayMetrics(reg prometheus.Registerer) *gatewayMetrics {
	m := &gatewayMetrics{
		ingestRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_gateway_ingest_requests_total",
			Help: "POST /v1/events requests by mode (structured, binary, batch) and HTTP status."}, []string{"mode", "code"}),
		ingestEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_gateway_ingested_events_total",
			Help: "Events durably queued by the gateway (answered 202)."}, []string{"consumer", "mode"}),
		ingestRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_gateway_invalid_events_total",
			Help: "Events refused at ingest with 400 (never queued)."}, []string{"consumer", "mode"}),
		agentCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_gateway_agent_calls_total",
			Help: "Calls to the agent by result: 2xx, 3xx, 409, 429, 4xx, 5xx, timeout, error."}, []string{"consumer", "result"}),
		agentSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "seqbox_gateway_agent_call_seconds",
			Help: "Duration of agent calls.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 18)}, []string{"consumer"}),
		agentDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_gateway_agent_verdicts_total", // the metric's published name
			Help: "What the agent said about the events it was given: applied, stale, version_conflict."}, []string{"consumer", "verdict"}),
		adminActions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_gateway_admin_actions_total",
			Help: "Operator requests made through the admin API, by action and final state."}, []string{"consumer", "action", "state"}),
		purgedEarly: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_purged_before_redelivery_total",
			Help: "Identities whose inbox row retention had purged and that were delivered again (and so applied again): retention is too short for the broker."}, []string{"consumer"}),
		purgeRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_gateway_purge_runs_total",
			Help: "Retention runs of the gateway, by result (ok, error)."}, []string{"consumer", "result"}),
		agentCircuitOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seqbox_gateway_agent_circuit_open",
			Help: "1 while dispatch to the agent is paused because the agent is down (or asked for a pause), 0 otherwise."}, []string{"consumer"}),
	}
	reg.MustRegister(m.agentCircuitOpen, m.ingestRequests, m.ingestEvents, m.ingestRejected, m.agentCalls, m.agentSeconds, m.agentDecisions,
		m.adminActions, m.purgedEarly, m.purgeRuns)
	m.tiles = prometheus.NewRegistry()
	m.tiles.MustRegister(m.ingestRejected)
	return m
}

// rejectedAtIngest is how many events POST /v1/events refused with 400
// since the server started, in every mode: the consumer's value of
// seqbox_gateway_invalid_events_total. Those events were never queued,
// so no consumer outcome counts them.
func (m *gatewayMetrics) rejectedAtIngest(consumer string) (int64, error) {
	families, err := m.tiles.Gather()
	if err != nil {
		return 0, err
	}
	var n float64
	for _, f := range families {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "consumer" && l.GetValue() == consumer {
					n += s.GetCounter().GetValue()
				}
			}
		}
	}
	return int64(n), nil
}

// newRegistry builds the registry /metrics serves: the process and Go
// collectors, every consumer metric of docs/design.md §14, the ledger's uncertain
// calls, the queue depth and the gateway's counters.
func (s *Server) newRegistry(ledger *effects.Ledger) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.consumerMetrics = seqbox.NewMetrics(reg)
	s.metrics = newGatewayMetrics(reg)
	reg.MustRegister(effects.NewCollector(ledger))
	depth := prometheus.NewDesc("seqbox_gateway_queue_depth", "Messages in the embedded queue, ready or leased.", []string{"queue", "state"}, nil)
	reg.MustRegister(&funcCollector{desc: depth, collect: func(ch chan<- prometheus.Metric) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ready, leased, err := s.queue.Depth(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(depth, err)
			return
		}
		ch <- prometheus.MustNewConstMetric(depth, prometheus.GaugeValue, float64(ready), s.opt.Queue, "ready")
		ch <- prometheus.MustNewConstMetric(depth, prometheus.GaugeValue, float64(leased), s.opt.Queue, "leased")
	}})
	return reg
}

// funcCollector is a collector of one description read by a function.
type funcCollector struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (f *funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }
func (f *funcCollector) Collect(ch chan<- prometheus.Metric) { f.collect(ch) }

// metricsHandler refreshes the consumer's gauges from the store (at most
// once a second) and serves the registry.
func (s *Server) metricsHandler() http.Handler {
	var mu sync.Mutex
	var last time.Time
	h := promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if time.Since(last) >= time.Second {
			last = time.Now()
			if err := s.consumer.RefreshMetrics(r.Context()); err != nil {
				s.opt.Logger.Warn("seqbox serve: metrics refresh failed", "err", err)
			}
		}
		mu.Unlock()
		h.ServeHTTP(w, r)
	})
}
