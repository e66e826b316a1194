package effects_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// Past an identity's business deadline the ledger makes no new call: a
// first call, or one after a failure, is refused with ErrPastDeadline and
// leaves no row behind; a call that succeeded before the deadline is
// still returned, so the decision it started can be recorded.
func TestNoNewCallPastTheBusinessDeadline(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		l, err := effects.New(st, effects.Config{Now: func() time.Time { return now }})
		require.NoError(t, err)
		ctx := context.Background()
		late := seqboxtype.Identity{Consumer: "c", Source: "s", ID: "late", Deadline: now.Add(-time.Second)}
		calls := 0
		call := func(context.Context, string) (string, error) { calls++; return "ref", nil }

		_, err = l.DoFor(ctx, late, "refund", call)
		require.ErrorIs(t, err, seqbox.ErrPastDeadline)
		require.Zero(t, calls, "no call past the deadline")
		_, err = st.Executor().EffectGet(ctx, effects.Key("c", "s", "late", "refund"))
		require.ErrorIs(t, err, store.ErrNotFound, "and no row written for it")

		// A failure before the deadline, then the deadline passes.
		id := seqboxtype.Identity{Consumer: "c", Source: "s", ID: "failed", Deadline: now.Add(time.Minute)}
		_, err = l.DoFor(ctx, id, "refund", func(context.Context, string) (string, error) {
			return "", effects.Definite(errors.New("422 from the remote side"))
		})
		require.Error(t, err)
		now = now.Add(2 * time.Minute)
		_, err = l.DoFor(ctx, id, "refund", call)
		require.ErrorIs(t, err, seqbox.ErrPastDeadline)
		require.Zero(t, calls, "a failed call is not made again past the deadline")

		// A success before it stands.
		ok := seqboxtype.Identity{Consumer: "c", Source: "s", ID: "ok", Deadline: now.Add(time.Minute)}
		ref, err := l.DoFor(ctx, ok, "refund", call)
		require.NoError(t, err)
		now = now.Add(2 * time.Minute)
		again, err := l.DoFor(ctx, ok, "refund", call)
		require.NoError(t, err)
		require.Equal(t, ref, again)
		require.Equal(t, 1, calls)
	})
}
