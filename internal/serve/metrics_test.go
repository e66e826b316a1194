package serve

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// metricValue reads one sample of /metrics (0 when absent).
func (r *running) metricValue(t *testing.T, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(r.scrape(t), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return 0
}

func (r *running) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(r.url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return string(b)
}

// /metrics carries every metric of docs/design.md §14, the ledger's and the
// gateway's; /healthz and /readyz answer.
func TestMetricsAndHealth(t *testing.T) {
	r := start(t, Options{})
	r.post(t, ev("a", "K", 1, ""))
	eventually(t, "applied", func() bool { return r.effects(t) == 1 })
	text := r.scrape(t)
	for _, name := range []string{
		"seqbox_deliveries_total", "seqbox_key_conflicts_total", "seqbox_gaps_recorded", "seqbox_redrives_total",
		"seqbox_receive_to_commit_seconds", "seqbox_held_messages", "seqbox_blocked_keys", "seqbox_oldest_stuck_age_seconds",
		"seqbox_dlq_size", "seqbox_inbox_rows", "seqbox_purged_rows_total", "seqbox_contract_failures_total",
		"seqbox_purged_before_redelivery_total", "seqbox_gateway_ingest_requests_total",
		"seqbox_gateway_ingested_events_total", "seqbox_gateway_queue_depth",
	} {
		require.Contains(t, text, "# HELP "+name+" ", "metric %s", name)
	}
	code, _, _ := r.call(t, "GET", "/healthz", "", nil, "")
	require.Equal(t, http.StatusOK, code)
	code, body, _ := r.call(t, "GET", "/readyz", "", nil, "")
	require.Equal(t, http.StatusOK, code, "%v", body)
	r.draining.Store(true)
	code, _, _ = r.call(t, "GET", "/readyz", "", nil, "")
	require.Equal(t, http.StatusServiceUnavailable, code)
}

// An event ingest refuses as invalid is a contract failure in the
// consumer's metrics too, as an envelope the pipeline rejects is, and one
// whose identity cannot be read is unidentified: before, only the
// gateway's own seqbox_gateway_invalid_events_total moved, and a
// dashboard on seqbox_contract_failures_total saw none.
func TestIngestRefusalsAreContractFailures(t *testing.T) {
	r := start(t, Options{})
	r.postWant(t, `{"specversion":"1.0","source":"s","type":"t"}`, http.StatusBadRequest)        // no id
	r.postWant(t, `{"specversion":"1.0","id":"a","source":"s","type":7}`, http.StatusBadRequest) // a bad type
	r.postWant(t, `not json`, http.StatusBadRequest)                                             // no envelope
	require.Equal(t, 3.0, r.metricValue(t, `seqbox_contract_failures_total{consumer="gateway"}`))
	require.Equal(t, 2.0, r.metricValue(t, `seqbox_unidentified_total{consumer="gateway"}`))
	require.Equal(t, 3.0, r.metricValue(t, `seqbox_gateway_invalid_events_total{consumer="gateway",mode="structured"}`))
}
