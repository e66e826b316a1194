package seqbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
)

// Metrics count committed outcomes by name and expose the stuck-work
// gauges from the store.
func TestMetricsCountOutcomesAndStuckWork(t *testing.T) {
	b := setup(t)
	reg := prometheus.NewRegistry()
	m := seqbox.NewMetrics(reg)
	now := time.Date(2026, 9, 25, 10, 0, 0, 0, time.UTC)
	b.cfg.Metrics = m
	b.cfg.Now = func() time.Time { return now }
	c := b.consumer(t)
	ctx := context.Background()
	ev := func(id, key string, v int, extra string) []byte {
		return []byte(`{"id":"` + id + `","source":"erp","type":"t","partitionkey":"` + key + `","objectversion":` +
			string(rune('0'+v)) + extra + `}`)
	}
	for _, raw := range [][]byte{ev("a", "PED-1", 1, ""), ev("a", "PED-1", 1, ""), ev("c", "PED-1", 3, ""),
		ev("x", "K2", 1, `,"data":{"fail":"permanent"}`)} {
		_, err := c.Deliver(ctx, raw, 1)
		require.NoError(t, err)
	}
	require.Equal(t, 1.0, testutil.ToFloat64(m.Deliveries.WithLabelValues("test", "applied")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Deliveries.WithLabelValues("test", "duplicate")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Deliveries.WithLabelValues("test", "held")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Deliveries.WithLabelValues("test", "dead_lettered")))

	now = now.Add(90 * time.Second)
	require.NoError(t, c.RefreshMetrics(ctx))
	require.Equal(t, 1.0, testutil.ToFloat64(m.HeldMessages.WithLabelValues("test")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.BlockedKeys.WithLabelValues("test")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.DLQSize.WithLabelValues("test")))
	require.Equal(t, 3.0, testutil.ToFloat64(m.InboxRows.WithLabelValues("test")))
	require.InDelta(t, 90.0, testutil.ToFloat64(m.OldestStuckAge.WithLabelValues("test")), 0.001)

	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Greater(t, n, 8)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP seqbox_blocked_keys Keys blocked behind a failed message or a gap.
# TYPE seqbox_blocked_keys gauge
seqbox_blocked_keys{consumer="test"} 1
`), "seqbox_blocked_keys"))
}
