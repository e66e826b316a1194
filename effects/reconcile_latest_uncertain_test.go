package effects_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// A reconciliation that finds nothing lets the call go again only once a
// whole Timeout has passed since the row last turned uncertain, not since
// it first did (docs/design.md §11): a call that was uncertain, reconciled
// as absent and made again, then uncertain a second time, may still be
// running at the remote side right after its own timeout, whatever the
// first call's age. A ledger that counted from the first time the row
// turned uncertain (UncertainAt, kept across rounds) called a third time
// one second after the second call, while the second might yet apply.
func TestReconcileWaitsATimeoutFromTheLatestUncertainCall(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		clock, now := movableClock()
		const timeout = time.Minute
		nothing := func(context.Context, effects.Effect) (effects.Reconciliation, error) {
			return effects.Reconciliation{}, nil // the remote side has no effect for the key
		}
		l, err := effects.New(st, effects.Config{Timeout: timeout, Reconcile: nothing, Now: now})
		require.NoError(t, err)
		ctx := context.Background()
		calls := 0
		lost := func(context.Context, string) (string, error) {
			calls++
			return "", errors.New("connection reset after the request went out")
		}
		var unc *effects.UncertainError

		_, err = l.DoFor(ctx, msg, "crm.create_task", lost)
		require.ErrorAs(t, err, &unc)
		require.Equal(t, 1, calls)

		// A whole Timeout later the remote side still has nothing: the call
		// goes again, under the same key, and is lost again.
		clock.Add(timeout.Microseconds())
		_, err = l.DoFor(ctx, msg, "crm.create_task", lost)
		require.ErrorAs(t, err, &unc)
		require.Equal(t, 2, calls, "reconciled as absent a Timeout after the first call: called again")
		e := state(t, l)
		require.Equal(t, effects.Uncertain, e.State)
		require.Equal(t, 2, e.Calls)

		// A second later the second call may still be running there.
		clock.Add(time.Second.Microseconds())
		_, err = l.DoFor(ctx, msg, "crm.create_task", lost)
		var wait *effects.ReconcileWaitError
		require.ErrorAs(t, err, &wait, "a reconciliation a second after the second uncertain call must wait, not call again")
		require.Equal(t, 2, calls, "called again within a Timeout of the latest uncertain call")
		require.True(t, now().Add(timeout-time.Second).Equal(wait.Until), "until %s", wait.Until)

		// Once that call's Timeout has passed, it may go again.
		clock.Add((timeout - time.Second).Microseconds())
		_, err = l.DoFor(ctx, msg, "crm.create_task", lost)
		require.ErrorAs(t, err, &unc)
		require.Equal(t, 3, calls)
	})
}
