package effects_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// afterResolveStore runs next right after the operator's resolution is
// written (the EffectRecord whose note starts "resolved "), once: another
// attempt that acts between Resolve's write and its read-back.
type afterResolveStore struct {
	store.Store
	next func()
}

func (s *afterResolveStore) Executor() store.Executor {
	return &afterResolveExecutor{Executor: s.Store.Executor(), s: s}
}

type afterResolveExecutor struct {
	store.Executor
	s *afterResolveStore
}

func (e *afterResolveExecutor) EffectRecord(ctx context.Context, p store.EffectRecordParams) error {
	err := e.Executor.EffectRecord(ctx, p)
	if next := e.s.next; err == nil && next != nil && strings.HasPrefix(p.LastError, "resolved ") {
		e.s.next = nil
		next()
	}
	return err
}

// An operator resolves an uncertain call failed, and the message's next
// attempt (another process) takes the failed row and calls again before
// Resolve reads the row back. The resolution took: failed is what lets
// the next attempt call again, and it did. Resolve says so (nil), not
// that the row "changed while it was being resolved" and nothing was
// resolved, which would send the operator to resolve a call that is
// already made again.
func TestResolvedFailedTookWhenTheNextAttemptCallsAgainAtOnce(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		other, err := effects.New(st, effects.Config{})
		require.NoError(t, err)
		wrapped := &afterResolveStore{Store: st}
		l, err := effects.New(wrapped, effects.Config{})
		require.NoError(t, err)
		_, err = l.DoFor(ctx, msg, "crm.create_task", func(context.Context, string) (string, error) {
			return "", errors.New("connection reset after the request went out")
		})
		var unc *effects.UncertainError
		require.ErrorAs(t, err, &unc)

		called := false
		wrapped.next = func() {
			ref, err := other.DoFor(ctx, msg, "crm.create_task", func(_ context.Context, key string) (string, error) {
				called = true
				require.Equal(t, unc.IdempotencyKey, key)
				return "task-2", nil
			})
			require.NoError(t, err)
			require.Equal(t, "task-2", ref)
		}
		require.NoError(t, l.Resolve(ctx, unc.IdempotencyKey, effects.Failed, "", "ana", "nothing in the CRM"),
			"the resolution took, and the next attempt called again as failed lets it")
		require.True(t, called, "the next attempt ran between the resolution and its read-back")
		e := state(t, l)
		require.Equal(t, effects.Succeeded, e.State)
		require.Equal(t, 2, e.Calls)
	})
}

// A frozen caller's call turned uncertain (its lease ran out), was
// reconciled as absent and made again by another attempt, whose call is
// uncertain too. When the frozen caller then reports its own call
// uncertain, that answer is of a call the row no longer counts: it is
// refused (ConflictError, a wait that spends no attempt), not returned as
// an uncertain call of its own.
func TestLateUncertainAnswerOfAnEarlierCallIsRefused(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		clock, now := movableClock()
		const timeout = time.Minute
		nothing := func(context.Context, effects.Effect) (effects.Reconciliation, error) {
			return effects.Reconciliation{}, nil
		}
		l, err := effects.New(st, effects.Config{Heartbeat: time.Hour, Timeout: timeout, Reconcile: nothing, Now: now})
		require.NoError(t, err)
		ctx := context.Background()

		f := freeze(l, func() (string, error) { return "", errors.New("connection reset after the request went out") })
		clock.Add((3*time.Hour + time.Second).Microseconds()) // its heartbeat stopped three heartbeats ago
		lost := func(context.Context, string) (string, error) {
			return "", errors.New("no answer from the CRM")
		}
		_, err = l.DoFor(ctx, msg, "crm.create_task", lost)
		var wait *effects.ReconcileWaitError
		require.ErrorAs(t, err, &wait, "the dead caller's call may still be running at the remote side")
		clock.Add(timeout.Microseconds())
		_, err = l.DoFor(ctx, msg, "crm.create_task", lost)
		var unc *effects.UncertainError
		require.ErrorAs(t, err, &unc)
		e := state(t, l)
		require.Equal(t, effects.Uncertain, e.State)
		require.Equal(t, 2, e.Calls, "reconciled as absent and called again")

		_, err = f.finish()
		var conflict *effects.ConflictError
		require.ErrorAs(t, err, &conflict, "the first call's late answer is of a call the row no longer counts")
		require.Equal(t, effects.Uncertain, conflict.State)
		e = state(t, l)
		require.Equal(t, effects.Uncertain, e.State)
		require.Equal(t, 2, e.Calls)
	})
}
