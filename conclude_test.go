package seqbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// A handler that learns from its system that the event is superseded
// concludes it: its writes roll back, the outcome is kept and audited, and
// the key moves on, so the next version applies without waiting.
func TestHandlerConcludesStale(t *testing.T) {
	b := setup(t)
	record := b.cfg.Handler
	b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		if err := record(ctx, tx, ev); err != nil {
			return err
		}
		if ev.ID == "opp-v2" {
			return seqbox.Conclude(seqboxtype.Stale, "agent: opportunity already at v3")
		}
		return nil
	}
	first := int64(1)
	b.cfg.FirstVersion = &first
	c := b.consumer(t)
	ctx := context.Background()
	deliver := func(id string, v, attempt int) seqboxtype.Result {
		results, err := c.Deliver(ctx, keyed(id, "opp", v), attempt)
		require.NoError(t, err)
		return results[0]
	}
	require.Equal(t, seqboxtype.Applied, deliver("opp-v1", 1, 1).Outcome)
	res := deliver("opp-v2", 2, 1)
	require.Equal(t, seqboxtype.Stale, res.Outcome)
	require.Contains(t, res.Reason, "agent: opportunity already at v3")
	require.Zero(t, b.effects(t, "opp-v2"), "the handler's write rolled back")
	require.Equal(t, seqboxtype.Duplicate, deliver("opp-v2", 2, 2).Outcome, "the identity is kept")
	require.Equal(t, seqboxtype.Applied, deliver("opp-v3", 3, 1).Outcome, "v3 is not held behind v2")
	audit, err := b.store.Executor().AuditList(ctx, store.AuditListParams{Consumer: b.cfg.Name, Key: "opp", Limit: 10})
	require.NoError(t, err)
	var stale int
	for _, a := range audit {
		if a.ID == "opp-v2" && a.Outcome == seqboxtype.Stale {
			stale++
		}
	}
	require.Equal(t, 1, stale)
	letters, err := b.store.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: b.cfg.Name, All: true})
	require.NoError(t, err)
	require.Empty(t, letters, "concluded, not dead-lettered")
}

func TestConcludeRefusesOtherOutcomes(t *testing.T) {
	err := seqbox.Conclude(seqboxtype.Applied, "x")
	require.True(t, seqbox.IsPermanent(err))
	require.ErrorContains(t, err, "only stale or version_conflict")
}

// In one batch, the concluded delivery rolls back alone: its batch-mates
// before and after it apply.
func TestHandlerConcludesInsideABatch(t *testing.T) {
	b := setup(t)
	record := b.cfg.Handler
	b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		if err := record(ctx, tx, ev); err != nil {
			return err
		}
		if ev.ID == "b-v2" {
			return seqbox.Conclude(seqboxtype.VersionConflict, "agent: v2 conflicts")
		}
		return nil
	}
	out, err := b.consumer(t).DeliverBatch(context.Background(), [][]byte{keyed("b-v1", "b", 1), keyed("b-v2", "b", 2), keyed("b-v3", "b", 3)})
	require.NoError(t, err)
	var got []seqboxtype.Outcome
	for _, results := range out {
		got = append(got, results[0].Outcome)
	}
	require.Equal(t, []seqboxtype.Outcome{seqboxtype.Applied, seqboxtype.VersionConflict, seqboxtype.Applied}, got)
	require.Equal(t, 2, b.effects(t, ""))
	require.Zero(t, b.effects(t, "b-v2"))
}
