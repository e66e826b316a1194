package seqbox_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// Version 2 of a new key arrives before version 1, under each rule of a
// key's first version. Without FirstVersion the first version seen is the
// key's baseline: v1 comes after it and is stale, and says so in those
// words, counted apart; keys show names the rule and the baseline. With
// FirstVersion 1, v2 is held until v1 arrives, and both apply in order.
func TestNewKeysSecondVersionFirstUnderEachRule(t *testing.T) {
	ctx := context.Background()
	t.Run("first version seen", func(t *testing.T) {
		b := setup(t)
		m := seqbox.NewMetrics(prometheus.NewRegistry())
		b.cfg.Metrics = m
		c := b.consumer(t)
		require.Equal(t, seqboxtype.Applied, mustDeliver(t, c, versioned("K", 2), 1)[0].Outcome)
		res := mustDeliver(t, c, versioned("K", 1), 1)[0]
		require.Equal(t, seqboxtype.Stale, res.Outcome)
		require.Equal(t, "version 1 arrived after version 2 became the key's baseline: with no first version configured, "+
			"a new key starts at the first version seen, and lower versions are stale", res.Reason)
		require.Equal(t, 1.0, testutil.ToFloat64(m.StaleBeforeBaseline.WithLabelValues("test")))

		// A version below a later committed one, but not below the
		// baseline, is plainly stale.
		require.Equal(t, seqboxtype.Applied, mustDeliver(t, c, versioned("K", 3), 1)[0].Outcome)
		res = mustDeliver(t, c, versioned("K", 2), 2)[0]
		require.Equal(t, seqboxtype.Duplicate, res.Outcome)
		raw := []byte(`{"id":"K-v2b","source":"erp","type":"t","partitionkey":"K","objectversion":2}`)
		res = mustDeliver(t, c, raw, 1)[0]
		require.Equal(t, []any{seqboxtype.Stale, "version 2 is older than the committed version 3"}, []any{res.Outcome, res.Reason})
		require.Equal(t, 1.0, testutil.ToFloat64(m.StaleBeforeBaseline.WithLabelValues("test")), "not counted")

		det, err := ops.Reporter{Op: b.store.Executor(), Consumer: "test"}.Key(ctx, "K")
		require.NoError(t, err)
		require.Equal(t, ops.FirstVersionRule{Rule: "first_seen", Version: ptr64(2),
			Says: "version 2, the first seen, started the key (no first version configured); a lower version that came later is stale"}, det.FirstVersion)
		audit, err := b.store.Executor().AuditList(ctx, store.AuditListParams{Consumer: "test", Key: "K", Limit: 10})
		require.NoError(t, err)
		require.Equal(t, res.Reason, audit[len(audit)-1].Reason)
		require.Contains(t, audit[0].NextAction, "FirstVersion")
	})
	t.Run("configured", func(t *testing.T) {
		b := setup(t)
		m := seqbox.NewMetrics(prometheus.NewRegistry())
		b.cfg.Metrics = m
		b.cfg.FirstVersion = ptr64(1)
		c := b.consumer(t)
		require.Equal(t, seqboxtype.Held, mustDeliver(t, c, versioned("K", 2), 1)[0].Outcome)
		results := mustDeliver(t, c, versioned("K", 1), 1)
		require.Equal(t, []seqboxtype.Outcome{seqboxtype.Applied, seqboxtype.Applied}, []seqboxtype.Outcome{results[0].Outcome, results[1].Outcome})
		require.Equal(t, []string{"K-v1", "K-v2"}, []string{results[0].ID, results[1].ID}, "in version order")
		require.Zero(t, testutil.ToFloat64(m.StaleBeforeBaseline.WithLabelValues("test")))
		det, err := ops.Reporter{Op: b.store.Executor(), Consumer: "test", FirstVersion: ptr64(1)}.Key(ctx, "K")
		require.NoError(t, err)
		require.Equal(t, "configured", det.FirstVersion.Rule)
		require.Equal(t, ptr64(1), det.FirstVersion.Version)
	})
}

func ptr64(v int64) *int64 { return &v }
