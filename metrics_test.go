package seqbox_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
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

// The signals seed 000 and seed 003 ask to follow beyond the outcome
// counts (docs/design.md §14's map): redeliveries settled, envelopes with
// no identity, the lags from occurrence to publication and from
// publication to commit, active and retrying keys, and how a batch's
// messages spread over keys. Each was missing before this test.
func TestMetricsFollowTheSeedsSignals(t *testing.T) {
	b := setup(t)
	reg := prometheus.NewRegistry()
	m := seqbox.NewMetrics(reg)
	now := time.Date(2026, 9, 25, 10, 0, 0, 0, time.UTC)
	b.cfg.Metrics = m
	b.cfg.Now = func() time.Time { return now }
	c := b.consumer(t)
	ctx := context.Background()

	// Occurred 10:00:00, published 10:00:03, committed 10:00:10.
	stamped := `{"id":"s1","source":"erp","type":"t","partitionkey":"P","objectversion":1,` +
		`"time":"2026-09-25T10:00:00Z","publishedat":"2026-09-25T10:00:03Z"}`
	now = now.Add(10 * time.Second)
	_, err := c.Deliver(ctx, []byte(stamped), 1)
	require.NoError(t, err)
	_, err = c.Deliver(ctx, []byte(stamped), 2) // the broker's redelivery: absorbed
	require.NoError(t, err)
	// Held first (v3 before v2), applied when v2 comes: its lags count once.
	held := `{"id":"s3","source":"erp","type":"t","partitionkey":"P","objectversion":3,"publishedat":"2026-09-25T10:00:03Z"}`
	res, err := c.Deliver(ctx, []byte(held), 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Held, res[0].Outcome)
	res, err = c.Deliver(ctx, []byte(`{"id":"s2","source":"erp","type":"t","partitionkey":"P","objectversion":2,"publishedat":"2026-09-25T10:00:03Z"}`), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"s2:applied", "s3:applied"}, outcomes(res))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Redelivered.WithLabelValues("test", "duplicate")))
	require.Equal(t, 0.0, testutil.ToFloat64(m.Redelivered.WithLabelValues("test", "applied")), "a first delivery is no redelivery")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP seqbox_occurrence_to_publication_seconds From an event's time to its publication (publishedat, or the broker's publish time).
# TYPE seqbox_occurrence_to_publication_seconds histogram
`+histogramLines("seqbox_occurrence_to_publication_seconds", 3, 1)+`
# HELP seqbox_publication_to_commit_seconds From an event's publication (publishedat, or the broker's publish time) to the commit of its outcome.
# TYPE seqbox_publication_to_commit_seconds histogram
`+histogramLines("seqbox_publication_to_commit_seconds", 7, 3)),
		"seqbox_occurrence_to_publication_seconds", "seqbox_publication_to_commit_seconds"))

	// No identity: unidentified and a contract failure; a bad type with an
	// identity: a contract failure only.
	for _, raw := range []string{`{"source":"erp","type":"t"}`, `{"id":"x","source":"erp","type":7}`} {
		_, err := c.Deliver(ctx, []byte(raw), 1)
		require.NoError(t, err)
	}
	require.Equal(t, 2.0, testutil.ToFloat64(m.ContractFailure.WithLabelValues("test")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Unidentified.WithLabelValues("test")))

	// Three messages of HOT and one of COLD in one batch (P's deliveries
	// above were one message each, but for s2's, which applied s3 too).
	ev := func(id, key string, v int, extra string) []byte {
		return []byte(`{"id":"` + id + `","source":"erp","type":"t","partitionkey":"` + key + `","objectversion":` +
			string(rune('0'+v)) + extra + `}`)
	}
	_, err = c.DeliverBatch(ctx, [][]byte{ev("h1", "HOT", 1, ""), ev("h2", "HOT", 2, ""), ev("c1", "COLD", 1, ""), ev("h3", "HOT", 3, "")})
	require.NoError(t, err)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP seqbox_key_messages_per_batch Deliveries of one key in one committed batch: the distribution of messages over keys.
# TYPE seqbox_key_messages_per_batch histogram
seqbox_key_messages_per_batch_bucket{consumer="test",le="1"} 4
seqbox_key_messages_per_batch_bucket{consumer="test",le="2"} 5
seqbox_key_messages_per_batch_bucket{consumer="test",le="4"} 6
seqbox_key_messages_per_batch_bucket{consumer="test",le="8"} 6
seqbox_key_messages_per_batch_bucket{consumer="test",le="16"} 6
seqbox_key_messages_per_batch_bucket{consumer="test",le="32"} 6
seqbox_key_messages_per_batch_bucket{consumer="test",le="64"} 6
seqbox_key_messages_per_batch_bucket{consumer="test",le="128"} 6
seqbox_key_messages_per_batch_bucket{consumer="test",le="256"} 6
seqbox_key_messages_per_batch_bucket{consumer="test",le="512"} 6
seqbox_key_messages_per_batch_bucket{consumer="test",le="1024"} 6
seqbox_key_messages_per_batch_bucket{consumer="test",le="+Inf"} 6
seqbox_key_messages_per_batch_sum{consumer="test"} 9
seqbox_key_messages_per_batch_count{consumer="test"} 6
`), "seqbox_key_messages_per_batch"))

	// A transient failure leaves its key retrying.
	_, err = c.Deliver(ctx, ev("r1", "RETRY", 1, `,"data":{"fail":"transient"}`), 1)
	require.NoError(t, err)
	require.NoError(t, c.RefreshMetrics(ctx))
	require.Equal(t, 4.0, testutil.ToFloat64(m.ActiveKeys.WithLabelValues("test")), "P, HOT, COLD and RETRY")
	require.Equal(t, 1.0, testutil.ToFloat64(m.RetryingKeys.WithLabelValues("test")))
}

// histogramLines is the exposition of a lag histogram (lagBuckets) of
// consumer "test" holding count observations of v seconds each.
func histogramLines(name string, v float64, count int) string {
	var sb strings.Builder
	le := 0.001
	for range 18 {
		n := 0
		if v <= le {
			n = count
		}
		fmt.Fprintf(&sb, "%s_bucket{consumer=\"test\",le=\"%s\"} %d\n", name, strconv.FormatFloat(le, 'g', -1, 64), n)
		le *= 2.5
	}
	fmt.Fprintf(&sb, "%s_bucket{consumer=\"test\",le=\"+Inf\"} %d\n%s_sum{consumer=\"test\"} %g\n%s_count{consumer=\"test\"} %d\n",
		name, count, name, v*float64(count), name, count)
	return sb.String()
}
