package effects_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/remoteapi"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// frozenCaller runs a call that reports back only when told to: a caller
// frozen mid-call (a stopped process, a long GC pause) whose heartbeat
// stopped, so its pending row looks like a dead caller's.
type frozenCaller struct {
	started chan struct{}
	wake    chan struct{}
	done    chan struct{}
	err     error
	ref     string
}

func freeze(l *effects.Ledger, answer func() (string, error)) *frozenCaller {
	f := &frozenCaller{started: make(chan struct{}), wake: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.ref, f.err = l.DoFor(context.Background(), msg, "crm.create_task", func(ctx context.Context, key string) (string, error) {
			close(f.started)
			<-f.wake
			return answer()
		})
	}()
	<-f.started
	return f
}

// finish wakes the caller and waits for Do to return.
func (f *frozenCaller) finish() (string, error) {
	close(f.wake)
	<-f.done
	return f.ref, f.err
}

// An operator resolves a frozen caller's call (its lease ran out, so it
// looks uncertain) as failed; then the call answers after all. The late
// answer does not overwrite the operator's resolution, and Do does not
// report success on the strength of a call the operator declared failed:
// it refuses the answer with a ConflictError, a wait that spends no
// attempt, and the next attempt follows the ledger (failed: call again
// under the same key).
func TestLateAnswerAfterAnOperatorResolvedIsRefused(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		clock, now := movableClock()
		l, err := effects.New(st, effects.Config{Heartbeat: time.Hour, Now: now})
		require.NoError(t, err)
		ctx := context.Background()

		f := freeze(l, func() (string, error) { return "task-1", nil })
		clock.Add((3*time.Hour + time.Second).Microseconds()) // its heartbeat stopped three heartbeats ago
		key := state(t, l).IdempotencyKey
		require.Equal(t, effects.Uncertain, state(t, l).State, "a frozen caller's call is listed as uncertain")
		require.NoError(t, l.Resolve(ctx, key, effects.Failed, "", "ana", "nothing in the CRM"))

		ref, err := f.finish()
		require.Error(t, err, "the late answer was taken as a success (ref %q) after the operator resolved the call failed", ref)
		var conflict *effects.ConflictError
		require.ErrorAs(t, err, &conflict)
		require.Equal(t, effects.Failed, conflict.State)
		require.Positive(t, conflict.Wait(), "a conflict is a wait, not a failure of the message")
		e := state(t, l)
		require.Equal(t, effects.Failed, e.State, "the operator's resolution stands")
		require.Contains(t, e.LastError, "resolved failed by ana")
		require.Contains(t, e.LastError, "refused")

		// The next attempt follows the ledger: failed, so it calls again
		// under the same key, and the remote side's answer is recorded.
		ref, err = l.DoFor(ctx, msg, "crm.create_task", func(_ context.Context, k string) (string, error) {
			require.Equal(t, key, k)
			return "task-1", nil
		})
		require.NoError(t, err)
		require.Equal(t, "task-1", ref)
		e = state(t, l)
		require.Equal(t, effects.Succeeded, e.State)
		require.Equal(t, 2, e.Calls)
	})
}

// The mirror case: the operator resolves it succeeded, and the frozen
// call then fails definitely. The late failure is refused too (not a
// definite failure that would dead-letter the message), and the next
// attempt answers the operator's reference without calling.
func TestLateFailureAfterAnOperatorResolvedSucceededIsRefused(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		clock, now := movableClock()
		l, err := effects.New(st, effects.Config{Heartbeat: time.Hour, Now: now})
		require.NoError(t, err)
		ctx := context.Background()

		f := freeze(l, func() (string, error) { return "", effects.Definite(errors.New("400 bad request")) })
		clock.Add((3*time.Hour + time.Second).Microseconds())
		key := state(t, l).IdempotencyKey
		require.NoError(t, l.Resolve(ctx, key, effects.Succeeded, "task-7", "ana", "found it in the CRM"))

		_, err = f.finish()
		var conflict *effects.ConflictError
		require.ErrorAs(t, err, &conflict)
		require.False(t, effects.IsDefinite(err), "a refused late answer is no definite failure: %v", err)
		e := state(t, l)
		require.Equal(t, effects.Succeeded, e.State)
		require.Equal(t, "task-7", e.Ref)

		ref, err := l.DoFor(ctx, msg, "crm.create_task", func(context.Context, string) (string, error) {
			t.Fatal("called again after an operator resolved it succeeded")
			return "", nil
		})
		require.NoError(t, err)
		require.Equal(t, "task-7", ref)
	})
}

// A caller that reports back between the operator's look and the
// operator's write wins, and the operator is told: Resolve fails instead
// of claiming a resolution that did not take.
func TestResolveSaysWhenTheCallReportedBackFirst(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		clock, now := movableClock()
		l, err := effects.New(st, effects.Config{Heartbeat: time.Hour, Now: now})
		require.NoError(t, err)
		ctx := context.Background()
		f := freeze(l, func() (string, error) { return "task-1", nil })
		clock.Add((3*time.Hour + time.Second).Microseconds())
		key := state(t, l).IdempotencyKey
		// The frozen caller wakes and reports back first (its row was
		// only listed as uncertain, never resolved): its success stands.
		ref, err := f.finish()
		require.NoError(t, err)
		require.Equal(t, "task-1", ref)
		require.ErrorContains(t, l.Resolve(ctx, key, effects.Failed, "", "ana", "nothing in the CRM"), "not uncertain")
		require.Equal(t, effects.Succeeded, state(t, l).State)
	})
}

// A call whose message is being decided right now (a live decision claim)
// is not resolved by hand: its decider reconciles it. The protocol's model
// found that a resolution under a live claim lets another event of the
// message's business key go ahead while the message asks again.
func TestResolveRefusesACallWhoseMessageIsBeingDecided(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		c := newCRM(t)
		l, err := effects.New(st, effects.Config{Timeout: time.Hour})
		require.NoError(t, err)
		ctx := context.Background()
		c.Arm(remoteapi.ResetBeforeApply)
		_, err = l.DoFor(ctx, msg, "crm.create_task", c.create())
		var unc *effects.UncertainError
		require.ErrorAs(t, err, &unc)
		now := time.Now()
		_, err = st.Executor().DecisionClaim(ctx, store.DecisionClaimParams{Consumer: msg.Consumer, Source: msg.Source, ID: msg.ID,
			Owner: "decider-1", Now: now, Until: now.Add(time.Minute)})
		require.NoError(t, err)
		err = l.Resolve(ctx, unc.IdempotencyKey, effects.Failed, "", "ops", "nothing in the CRM")
		require.ErrorIs(t, err, effects.ErrBeingDecided)
		require.Equal(t, effects.Uncertain, state(t, l).State, "nothing was resolved")
	})
}
