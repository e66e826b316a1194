package effects_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/ride"
	"github.com/seqbox/seqbox/store"
)

// Inside a Decider (a ride slot in the context), a succeeded call's
// record waits in the slot: the row stays pending until the decision's
// commit. A second call of the same Decider writes the first one's
// record before it begins, so that no call starts while an earlier
// one's result is unwritten; a call for another identity writes its own.
func TestCallInADeciderLeavesItsRecordToRide(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		l, err := effects.New(st, effects.Config{})
		require.NoError(t, err)
		ctx, slot := ride.With(context.Background(), msg.Consumer, msg.Source, msg.ID)
		rows := func() map[string]effects.State {
			es, err := l.List(context.Background(), effects.Filter{Consumer: msg.Consumer})
			require.NoError(t, err)
			out := map[string]effects.State{}
			for _, e := range es {
				out[e.ID+"/"+e.Action] = e.State
			}
			return out
		}
		ref, err := l.DoFor(ctx, msg, "crm.create_task", func(context.Context, string) (string, error) { return "task-1", nil })
		require.NoError(t, err)
		require.Equal(t, "task-1", ref)
		require.Equal(t, map[string]effects.State{msg.ID + "/crm.create_task": effects.Pending}, rows(), "the record waits to ride with the decision")

		var during map[string]effects.State
		_, err = l.DoFor(ctx, msg, "mail.send", func(context.Context, string) (string, error) {
			during = rows()
			return "mail-1", nil
		})
		require.NoError(t, err)
		require.Equal(t, effects.Succeeded, during[msg.ID+"/crm.create_task"], "written before the second call began")

		held := slot.Close()
		require.NotNil(t, held, "the second call's record waits")
		require.Equal(t, "mail-1", held.Params.Ref)
		require.NoError(t, held.Record(context.Background()))
		require.Equal(t, effects.Succeeded, rows()[msg.ID+"/mail.send"])

		other := msg
		other.ID = "evt-other"
		fresh, _ := ride.With(context.Background(), msg.Consumer, msg.Source, msg.ID)
		_, err = l.DoFor(fresh, other, "crm.create_task", func(context.Context, string) (string, error) { return "task-2", nil })
		require.NoError(t, err)
		require.Equal(t, effects.Succeeded, rows()[other.ID+"/crm.create_task"], "another identity's call writes its own record")
	})
}
