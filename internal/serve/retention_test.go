package serve

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/stretchr/testify/require"
)

// Retention purges expired identities and the gateway's envelopes; an
// identity that comes back after its purge is applied again and counted
// in seqbox_purged_before_redelivery_total. A retention shorter than the
// redelivery window is refused (docs/design.md §13).
func TestRetentionPurgeAndEarlyPurgeMetric(t *testing.T) {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	r := start(t, Options{Policy: seqbox.Config{Now: now, Policies: seqbox.Policies{Retention: 3 * time.Hour, RedeliveryWindow: time.Hour,
		DLQRetention: time.Hour, RedriveWindow: time.Hour}}})
	r.post(t, ev("p1", "P", 1, ""))
	eventually(t, "applied", func() bool { return r.effects(t) == 1 })
	offset.Store(int64(4 * time.Hour))
	r.purge(t.Context())
	v, err := r.retentionView(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, v.LastPurgedInbox)
	require.EqualValues(t, 1, v.LastPurgedEnvelopes)
	require.Empty(t, v.LastRunError)
	require.Equal(t, "3h0m0s", v.Retention)
	body := r.admin(t, "GET", "/v1/admin/retention", "", 200)
	require.EqualValues(t, 1, body["purged_inbox_total"])

	r.post(t, ev("p1", "P", 1, "")) // the queue redelivers after the purge
	eventually(t, "counted", func() bool {
		return r.metricValue(t, `seqbox_purged_before_redelivery_total{consumer="gateway"}`) == 1
	})
	require.EqualValues(t, 1, r.metricValue(t, `seqbox_purged_rows_total{consumer="gateway"}`))

	_, err = New(t.Context(), Options{DB: t.TempDir() + "/x.db", Policy: seqbox.Config{Policies: seqbox.Policies{Retention: time.Hour}}})
	require.ErrorIs(t, err, seqbox.ErrInvalidConfig)
	require.ErrorContains(t, err, "Retention")
}

// A server that starts over a database whose retention purged identities
// (another run's purge: none in this process) still counts one that comes
// back after its purge. (Without the look at the tombstones at start,
// every test passed: only a purge in the same process turned the check
// on.)
func TestEarlyPurgeIsCountedAfterARestart(t *testing.T) {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	opt := Options{DB: filepath.Join(t.TempDir(), "seqbox.db"), Policy: seqbox.Config{Now: now, Policies: seqbox.Policies{
		Retention: 3 * time.Hour, RedeliveryWindow: time.Hour, DLQRetention: time.Hour, RedriveWindow: time.Hour}}}
	first := start(t, opt)
	first.post(t, ev("p1", "P", 1, ""))
	eventually(t, "applied", func() bool { return first.effects(t) == 1 })
	offset.Store(int64(4 * time.Hour))
	first.purge(t.Context())
	first.stop()

	again := start(t, opt)
	again.post(t, ev("p1", "P", 1, "")) // the queue redelivers after the purge, to a new process
	eventually(t, "counted by the new process", func() bool {
		return again.metricValue(t, `seqbox_purged_before_redelivery_total{consumer="gateway"}`) == 1
	})
}
