package effects_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/remoteapi"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// The collector counts the calls the ledger recorded by result (seed 003's
// "effects refused at the destination") and times each reconciliation
// from the call's turning uncertain (seed 003's "time to
// reconciliation"), beside the uncertain calls it reads from the store.
func TestCollectorCountsCallsAndTimesReconciliations(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		c := newCRM(t)
		clock, now := movableClock()
		l, err := effects.New(st, effects.Config{Timeout: 500 * time.Millisecond, Reconcile: c.reconcile, Now: now})
		require.NoError(t, err)
		ctx := context.Background()

		c.Arm(remoteapi.DropAfterApply)
		_, err = l.DoFor(ctx, msg, "crm.create_task", c.create())
		var unc *effects.UncertainError
		require.ErrorAs(t, err, &unc)
		clock.Add((2 * time.Second).Microseconds())
		_, err = l.DoFor(ctx, msg, "crm.create_task", c.create()) // reconciled: applied, 2 s after it turned uncertain
		require.NoError(t, err)

		other := seqboxtype.Identity{Consumer: msg.Consumer, Source: "crm", ID: "evt-483"}
		_, err = l.DoFor(ctx, other, "crm.create_task", c.create())
		require.NoError(t, err)
		refused := seqboxtype.Identity{Consumer: msg.Consumer, Source: "crm", ID: "evt-484"}
		_, err = l.DoFor(ctx, refused, "crm.create_task", func(context.Context, string) (string, error) {
			return "", effects.NotApplied(errors.New("422: no such customer"))
		})
		require.True(t, effects.IsNotApplied(err), "%v", err)

		require.NoError(t, testutil.CollectAndCompare(effects.NewCollector(l), strings.NewReader(`
# HELP seqbox_effects_calls_total External calls whose outcome was recorded, by result: succeeded, refused (the remote side did not apply it) or uncertain.
# TYPE seqbox_effects_calls_total counter
seqbox_effects_calls_total{action="crm.create_task",consumer="crm-worker",result="refused"} 1
seqbox_effects_calls_total{action="crm.create_task",consumer="crm-worker",result="succeeded"} 1
seqbox_effects_calls_total{action="crm.create_task",consumer="crm-worker",result="uncertain"} 1
# HELP seqbox_effects_reconcile_seconds From a call turning uncertain to its reconciliation, by what the remote side had: applied or absent.
# TYPE seqbox_effects_reconcile_seconds histogram
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="0.1"} 0
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="0.25"} 0
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="0.625"} 0
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="1.5625"} 0
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="3.90625"} 1
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="9.765625"} 1
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="24.4140625"} 1
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="61.03515625"} 1
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="152.587890625"} 1
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="381.4697265625"} 1
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="953.67431640625"} 1
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="2384.185791015625"} 1
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="5960.4644775390625"} 1
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="14901.161193847656"} 1
seqbox_effects_reconcile_seconds_bucket{action="crm.create_task",consumer="crm-worker",found="applied",le="+Inf"} 1
seqbox_effects_reconcile_seconds_sum{action="crm.create_task",consumer="crm-worker",found="applied"} 2
seqbox_effects_reconcile_seconds_count{action="crm.create_task",consumer="crm-worker",found="applied"} 1
`), "seqbox_effects_calls_total", "seqbox_effects_reconcile_seconds"))
	})
}
