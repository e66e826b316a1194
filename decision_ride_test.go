package seqbox_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// ledgerRow reads the ledger row of an identity's call of action.
func (b *bundle) ledgerRow(t *testing.T, id, action string) store.EffectRow {
	t.Helper()
	row, err := b.store.Executor().EffectGet(context.Background(), effects.Key(b.cfg.Name, "crm", id, action))
	require.NoError(t, err)
	return row
}

// A Decider's effects-ledger call that succeeded is recorded in the same
// commit as the decision, not in one of its own before it: right after
// ledger.Do returns, inside the Decider, the row is still pending; once
// the message is applied, the row is succeeded with the call's reference
// and the decision is that reference. (Before, the row was succeeded the
// moment Do returned: two commits after the call where one does.)
func TestCallResultRidesWithTheDecision(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	ledger, err := effects.New(b.store, effects.Config{Timeout: time.Hour})
	require.NoError(t, err)
	var inside seqboxtype.Effect
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		ref, err := ledger.Do(ctx, "crm.create_task", func(ctx context.Context, key string) (string, error) {
			return "task-" + ev.ID, nil
		})
		if err != nil {
			return nil, err
		}
		row, err := b.store.Executor().EffectGet(ctx, effects.Key(b.cfg.Name, ev.Source, ev.ID, "crm.create_task"))
		if err != nil {
			return nil, err
		}
		inside = row.State
		return []byte(ref), nil
	}
	var applied []byte
	handler := b.cfg.Handler
	b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		applied, _ = seqbox.DecisionFrom(ctx)
		return handler(ctx, tx, ev)
	}
	results, err := b.consumer(t).Deliver(ctx, keyed("m1", "k1", 1), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"m1:applied"}, outcomes(results))
	require.Equal(t, seqboxtype.EffectPending, inside, "the call's result waits for the decision's commit")
	require.Equal(t, []byte("task-m1"), applied)
	row := b.ledgerRow(t, "m1", "crm.create_task")
	require.Equal(t, seqboxtype.EffectSucceeded, row.State)
	require.Equal(t, "task-m1", row.Ref)
	require.Equal(t, 1, row.Calls)
}

// A call's row resolved by an operator between the call's answer and the
// decision's record (its caller looked dead: its lease ran out) keeps the
// operator's resolution, and the decision made from the refused answer is
// never recorded nor applied: the message waits, and its next attempt
// follows the ledger. Resolved failed, it calls again under the same key
// and applies that call's answer; resolved succeeded, it applies the
// operator's reference without calling.
func TestRefusedAnswerIsNotDecided(t *testing.T) {
	for _, tc := range []struct {
		resolve     effects.State
		ref, reason string
		applied     string
		calls       int
	}{
		{effects.Failed, "", "nothing at the CRM", "task-2", 2},
		{effects.Succeeded, "op-7", "created by hand in the CRM", "op-7", 1},
	} {
		for kind, open := range map[string]func(*testing.T) *bundle{"sqlite": setup, "postgres": setupPostgres} {
			t.Run(kind+"/"+string(tc.resolve), func(t *testing.T) {
				b := open(t)
				ctx := context.Background()
				var mu sync.Mutex
				now := time.Now()
				clock := func() time.Time {
					mu.Lock()
					defer mu.Unlock()
					return now
				}
				ledger, err := effects.New(b.store, effects.Config{Timeout: time.Minute, Now: clock})
				require.NoError(t, err)
				var calls atomic.Int32
				b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
					ref, err := ledger.Do(ctx, "crm.create_task", func(ctx context.Context, key string) (string, error) {
						return "task-" + string(rune('0'+calls.Add(1))), nil
					})
					if err != nil || calls.Load() > 1 || ref == tc.ref {
						return []byte(ref), err
					}
					// The first answer is in, but its caller froze past its
					// lease: an operator checked the remote side and resolved
					// the call.
					mu.Lock()
					now = now.Add(time.Hour)
					mu.Unlock()
					key := effects.Key(b.cfg.Name, ev.Source, ev.ID, "crm.create_task")
					if err := ledger.Resolve(ctx, key, tc.resolve, tc.ref, "ops", tc.reason); err != nil {
						return nil, err
					}
					return []byte(ref), nil
				}
				var applied []string
				handler := b.cfg.Handler
				b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
					d, _ := seqbox.DecisionFrom(ctx)
					applied = append(applied, string(d))
					return handler(ctx, tx, ev)
				}
				c := b.consumer(t)
				first, err := c.Deliver(ctx, keyed("m1", "k1", 1), 1)
				require.NoError(t, err)
				require.NotEqual(t, []string{"m1:applied"}, outcomes(first), "the refused answer applied nothing")
				require.Empty(t, applied)
				_, err = b.store.Executor().DecisionGet(ctx, store.MessageRef{Consumer: b.cfg.Name, Source: "crm", ID: "m1"})
				require.ErrorIs(t, err, store.ErrNotFound, "no decision was recorded from the refused answer")
				require.Equal(t, tc.resolve, b.ledgerRow(t, "m1", "crm.create_task").State, "the operator's resolution stands")

				second, err := c.Deliver(ctx, keyed("m1", "k1", 1), 2)
				require.NoError(t, err)
				require.Equal(t, []string{"m1:applied"}, outcomes(second))
				require.Equal(t, []string{tc.applied}, applied, "the ledger's answer after the resolution")
				row := b.ledgerRow(t, "m1", "crm.create_task")
				require.Equal(t, seqboxtype.EffectSucceeded, row.State)
				require.Equal(t, tc.applied, row.Ref)
				require.Equal(t, tc.calls, row.Calls)
				require.EqualValues(t, tc.calls, calls.Load(), "calls made at the remote side")
			})
		}
	}
}

// Only one call's result waits for the decision: a Decider's second
// ledger call begins only once the first one's result is written, and a
// Decider that fails after its call succeeded still leaves the call
// recorded as succeeded (it happened), so that the next attempt returns
// its reference without calling again.
func TestHeldCallResultIsWrittenBeforeTheNextCallAndOnFailure(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	ledger, err := effects.New(b.store, effects.Config{Timeout: time.Hour})
	require.NoError(t, err)
	state := func(id, action string) seqboxtype.Effect { return b.ledgerRow(t, id, action).State }
	var firstWhenSecondRan seqboxtype.Effect
	var calls atomic.Int32
	fail := true
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		first, err := ledger.Do(ctx, "crm.create_task", func(ctx context.Context, key string) (string, error) {
			calls.Add(1)
			return "task", nil
		})
		if err != nil {
			return nil, err
		}
		second, err := ledger.Do(ctx, "mail.send", func(ctx context.Context, key string) (string, error) {
			firstWhenSecondRan = state(ev.ID, "crm.create_task")
			return "mail", nil
		})
		if err != nil {
			return nil, err
		}
		if fail {
			fail = false
			return nil, errors.New("the model's answer did not parse")
		}
		return []byte(first + "+" + second), nil
	}
	c := b.consumer(t)
	results, err := c.Deliver(ctx, keyed("m1", "k1", 1), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"m1:retry"}, outcomes(results))
	require.Equal(t, seqboxtype.EffectSucceeded, firstWhenSecondRan, "the first call's result was written before the second call began")
	require.Equal(t, seqboxtype.EffectSucceeded, state("m1", "mail.send"), "the Decider failed after its call: the call is recorded all the same")
	results, err = c.Deliver(ctx, keyed("m1", "k1", 1), 2)
	require.NoError(t, err)
	require.Equal(t, []string{"m1:applied"}, outcomes(results))
	require.EqualValues(t, 1, calls.Load(), "each call made once across the two attempts")
	d, err := b.store.Executor().DecisionGet(ctx, store.MessageRef{Consumer: b.cfg.Name, Source: "crm", ID: "m1"})
	require.NoError(t, err)
	require.Equal(t, []byte("task+mail"), d.Value)
}

// A Decider that panics after its ledger call succeeded ends its message
// dead-lettered (a panic is permanent), and the call it made is recorded
// as succeeded all the same: its record does not wait for a decision that
// will never come.
func TestPanickingDeciderAfterItsCallLeavesTheCallRecorded(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	ledger, err := effects.New(b.store, effects.Config{Timeout: time.Hour})
	require.NoError(t, err)
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		if _, err := ledger.Do(ctx, "crm.create_task", func(ctx context.Context, key string) (string, error) {
			return "task-" + ev.ID, nil
		}); err != nil {
			return nil, err
		}
		panic("the model's answer had no route")
	}
	results, err := b.consumer(t).Deliver(ctx, keyed("m1", "k1", 1), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"m1:dead_lettered"}, outcomes(results))
	row := b.ledgerRow(t, "m1", "crm.create_task")
	require.Equal(t, seqboxtype.EffectSucceeded, row.State, "the call happened: it is recorded")
	require.Equal(t, "task-m1", row.Ref)
}

// A call's result that was to ride with its decision is written alone
// when the decision's record fails: the call took effect, and its row
// says so (succeeded, with its reference), so that the next attempt takes
// the recorded answer instead of finding a pending row and calling the
// remote side again; and the decision's claim is dropped, so that
// another process takes the redelivery at once. The store refuses the
// decision here with a trigger. Without the lone write, or with the claim
// kept (both found by mutation testing, docs/mutation.md), the row stayed
// pending, or the other process waited for the claim to run out.
func TestCallResultIsRecordedWhenItsDecisionsRecordFails(t *testing.T) {
	for kind, open := range map[string]func(*testing.T) *bundle{"sqlite": setup, "postgres": setupPostgres} {
		t.Run(kind, func(t *testing.T) {
			b := open(t)
			ctx := context.Background()
			refuse, allow := `CREATE TRIGGER refuse_decisions BEFORE INSERT ON seqbox_decisions BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`,
				`DROP TRIGGER refuse_decisions`
			if kind == "postgres" {
				_, err := b.store.DB().ExecContext(ctx, `CREATE FUNCTION refuse_decision() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN RAISE EXCEPTION 'refused by the test'; END $$`)
				require.NoError(t, err)
				refuse = `CREATE TRIGGER refuse_decisions BEFORE INSERT ON seqbox_decisions FOR EACH ROW EXECUTE FUNCTION refuse_decision()`
				allow = `DROP TRIGGER refuse_decisions ON seqbox_decisions`
			}
			ledger, err := effects.New(b.store, effects.Config{Timeout: time.Hour})
			require.NoError(t, err)
			var calls atomic.Int32
			b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
				ref, err := ledger.Do(ctx, "crm.create_task", func(ctx context.Context, key string) (string, error) {
					calls.Add(1)
					return "task-" + ev.ID, nil
				})
				return []byte(ref), err
			}
			c := b.consumer(t)
			_, err = b.store.DB().ExecContext(ctx, refuse)
			require.NoError(t, err)
			first, err := c.Deliver(ctx, keyed("m1", "k1", 1), 1)
			require.NoError(t, err)
			require.Equal(t, []string{"m1:retry"}, outcomes(first), "the decision could not be recorded")
			row := b.ledgerRow(t, "m1", "crm.create_task")
			require.Equal(t, seqboxtype.EffectSucceeded, row.State, "the call's result, written alone")
			require.Equal(t, "task-m1", row.Ref)

			_, err = b.store.DB().ExecContext(ctx, allow)
			require.NoError(t, err)
			// Another process takes the redelivery: the failed record's
			// claim was dropped, so it decides at once, from the ledger.
			second, err := b.consumer(t).Deliver(ctx, keyed("m1", "k1", 1), 2)
			require.NoError(t, err)
			require.Equal(t, []string{"m1:applied"}, outcomes(second), "the claim of the failed record was dropped")
			require.Equal(t, int32(1), calls.Load(), "the remote side was called once")
		})
	}
}
