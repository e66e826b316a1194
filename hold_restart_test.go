package seqbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
)

// A message held behind a predecessor that retries starts its hold over
// once that predecessor is through and a gap is left before it: every
// hold is bounded by HoldTimeout from the moment the message only waits
// for a missing version (docs/design.md §7.3), not from when it was
// parked. Here v3 waited ten minutes behind v1's retries; once v1
// applies, v2 still has HoldTimeout to come. Before this test a mutant
// that kept the old deadline (unpark.go, nextParked: the holds not
// started again) survived every suite: the next sweep advanced over v2
// at once, v3 applied before it, and v2 came too late, stale.
func TestHoldStartsOverOnceThePredecessorIsThrough(t *testing.T) {
	for kind, open := range map[string]func(*testing.T) *bundle{"sqlite": setup, "postgres": setupPostgres} {
		t.Run(kind, func(t *testing.T) { holdStartsOver(t, open(t)) })
	}
}

// holdStartsOver is TestHoldStartsOverOnceThePredecessorIsThrough on b's
// store.
func holdStartsOver(t *testing.T, b *bundle) {
	a := newAgent()
	a.fail["v1"] = 1
	clock := newFoundClock()
	first := int64(1)
	b.cfg.Now, b.cfg.Decide, b.cfg.FirstVersion = clock.Now, a.decide, &first
	b.cfg.HoldTimeout, b.cfg.HoldExpiry, b.cfg.Retry.MaxAttempts = time.Minute, seqbox.HoldExpiryAdvance, 5
	c := b.consumer(t)
	ctx := context.Background()
	require.Equal(t, []string{"v1:retry"}, outcomes(mustDeliver(t, c, keyed("v1", "opp", 1), 1)))
	require.Equal(t, []string{"v3:held"}, outcomes(mustDeliver(t, c, keyed("v3", "opp", 3), 1)))
	clock.Advance(10 * time.Minute)
	swept, err := c.Sweep(ctx)
	require.NoError(t, err)
	require.Empty(t, swept, "v1 holds the key's turn while it retries: v3's hold is no gap yet")

	require.Equal(t, []string{"v1:applied"}, outcomes(mustDeliver(t, c, keyed("v1", "opp", 1), 2)), "v3 still waits, for v2")
	clock.Advance(time.Second)
	swept, err = c.Sweep(ctx)
	require.NoError(t, err)
	require.Empty(t, outcomes(swept), "v3's hold started over when v1 applied: v2 has a minute to come")

	require.Equal(t, []string{"v2:applied", "v3:applied"}, outcomes(mustDeliver(t, c, keyed("v2", "opp", 2), 1)))
}
