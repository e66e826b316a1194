package seqbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// A consumer driven by Deliver gets Run's upkeep from Maintain: a hold that
// reached HoldTimeout ends (HoldExpiry=advance applies the held version),
// and identities whose retention ended are purged.
func TestMaintainDoesWhatRunDoesInTheBackground(t *testing.T) {
	ctx := context.Background()
	b := setup(t)
	now := fakeClock(b)
	b.cfg.HoldTimeout, b.cfg.HoldExpiry = time.Minute, seqbox.HoldExpiryAdvance
	c := b.consumer(t)

	res, err := c.Deliver(ctx, versioned("K", 1), 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Applied, res[0].Outcome)
	res, err = c.Deliver(ctx, versioned("K", 3), 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Held, res[0].Outcome)

	require.NoError(t, c.Maintain(ctx))
	require.Equal(t, 0, b.effects(t, "K-v3"), "the hold has not timed out yet")

	now.Add(int64(2 * time.Minute))
	require.NoError(t, c.Maintain(ctx))
	require.Equal(t, 1, b.effects(t, "K-v3"), "Maintain ended the hold and applied v3")

	inbox := func() (n int) {
		require.NoError(t, b.store.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_inbox WHERE consumer = $1`, b.cfg.Name).Scan(&n))
		return n
	}
	require.Equal(t, 2, inbox())
	now.Add(int64(60 * 24 * time.Hour)) // past the default 30-day retention
	require.NoError(t, c.Maintain(ctx))
	require.Equal(t, 0, inbox(), "Maintain purged the identities whose retention ended")
}

// A key blocked by a hold that timed out (HoldExpiry=block) has no dead
// letter to redrive or skip: the audit of a version parked behind it says
// to release the key, as keys list does. Before, it said "redrive or skip
// the message blocking the key", which no dead letter answered.
func TestAGapBlockNamesKeysReleaseAsTheWayOut(t *testing.T) {
	ctx := context.Background()
	b := setup(t)
	now := fakeClock(b)
	b.cfg.HoldTimeout, b.cfg.HoldExpiry = time.Minute, seqbox.HoldExpiryBlock
	c := b.consumer(t)
	// In this order: a map's would deliver v3 first half the time, and a
	// key's first version applies whatever its number.
	for _, step := range []struct {
		v    int
		want seqboxtype.Outcome
	}{{1, seqboxtype.Applied}, {3, seqboxtype.Held}} {
		res, err := c.Deliver(ctx, versioned("K", step.v), 1)
		require.NoError(t, err)
		require.Equal(t, step.want, res[0].Outcome, "v%d", step.v)
	}
	now.Add(int64(2 * time.Minute))
	require.NoError(t, c.Maintain(ctx))
	res, err := c.Deliver(ctx, versioned("K", 4), 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Blocked, res[0].Outcome)
	audit, err := b.store.Executor().AuditList(ctx, store.AuditListParams{Consumer: b.cfg.Name, Key: "K", Limit: 10})
	require.NoError(t, err)
	var found bool
	for _, a := range audit {
		if a.ID == "K-v4" {
			found = true
			require.Equal(t, "release the key (seqbox keys release): it is blocked by a gap, with no dead letter behind it", a.NextAction)
		}
	}
	require.True(t, found, "v4's audit row: %+v", audit)
}

// The sweep ends, past the broker's redelivery window, only unkeyed turns
// nobody waits behind; a keyed turn with nothing held behind it stays,
// for its message may be waiting in its process for a slot to be decided
// in (docs/design.md §10.1; the chaos harness's dropped-message scenario
// dead-lettered such live events when the sweep ended every stale turn).
// No test held a keyed turn past the window alone: a planted bug that
// let the sweep end keyed turns too passed every suite.
func TestTheSweepLeavesAKeyedTurnNobodyWaitsBehind(t *testing.T) {
	ctx := context.Background()
	b := setup(t)
	now := fakeClock(b)
	b.cfg.Decide = func(context.Context, seqboxtype.Event) ([]byte, error) { return nil, errors.New("503 from the model") }
	c := b.consumer(t)
	res, err := c.Deliver(ctx, keyed("e1", "K", 1), 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Retry, res[0].Outcome, res[0].Reason)
	now.Add(int64(15 * 24 * time.Hour)) // past the default 14-day redelivery window
	require.NoError(t, c.Maintain(ctx))
	letters, err := b.store.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: b.cfg.Name, All: true})
	require.NoError(t, err)
	require.Empty(t, letters, "the sweep ended a keyed turn nobody waits behind")
	_, err = b.store.Executor().RetryOnKey(ctx, store.KeyRef{Consumer: b.cfg.Name, Key: "K"})
	require.NoError(t, err, "e1 keeps its key's turn")
}

// fakeClock sets b's clock to 2026-12-01 12:00 UTC, moved on by adding
// nanoseconds to what it returns.
func fakeClock(b *bundle) *atomic.Int64 {
	now := &atomic.Int64{}
	now.Store(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	b.cfg.Now = func() time.Time { return time.Unix(0, now.Load()) }
	return now
}
