package storetest

import (
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// exerciseFinish covers how a message's life on its key ends: whatever the
// outcome, nothing may stay held behind it, no stale bookkeeping may come
// back later, and housekeeping must act only on what is still true.
func exerciseFinish(t *testing.T, open Factory) {
	const k = "OPP-77"
	t.Run("RetryThenExpiredUnparksSuccessors", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.MaxAge = time.Minute })
		h := newOrdHandler(e.cfg.Name)
		h.failOnce("a")
		c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })
		at := ordWithTime(e.clock.Now())
		rawA := ordEvent("a", k, nil, "t", at)
		require.Equal(t, []string{"a:retry"}, ordSummary(e.deliver(c, rawA, 1)))
		fresh := ordWithTime(e.clock.Now().Add(2 * time.Minute))
		require.Equal(t, []string{"b:held"}, ordSummary(e.deliver(c, ordEvent("b", k, nil, "t", fresh), 1)))
		e.clock.Advance(2 * time.Minute) // the backoff outlived the business deadline
		results := e.deliver(c, rawA, 2)
		require.Equal(t, []string{"a:expired", "b:applied"}, ordSummary(results), "b waited for a, not forever")
		e.requireNothingParked()
	})
	t.Run("RetryThenSemanticDuplicateLeavesNoRetryBehind", func(t *testing.T) {
		e := ordSetup(t, open)
		h := newOrdHandler(e.cfg.Name)
		h.failOnce("a")
		c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })
		rawA := ordEvent("a", k, nil, "t", ordWithAttr("businesskey", "B"))
		require.Equal(t, []string{"a:retry"}, ordSummary(e.deliver(c, rawA, 1)))
		e.deliver(c, ordEvent("a2", "other", nil, "t", ordWithAttr("businesskey", "B")), 1)
		require.Equal(t, []string{"a:semantic_duplicate"}, ordSummary(e.deliver(c, rawA, 2)))
		// Retention purges a's identity; its attempts must not come back and
		// hold the key.
		r, err := e.st.Executor().InboxPurge(e.ctx, store.InboxPurgeParams{Consumer: e.cfg.Name, Now: e.clock.Now().Add(365 * 24 * time.Hour), Limit: 100})
		require.NoError(t, err)
		require.EqualValues(t, 2, r.Removed)
		require.Equal(t, []string{"c:applied"}, ordSummary(e.deliver(c, ordEvent("c", k, nil, "t"), 1)))
	})
	t.Run("SweepLeavesAHoldThatClosedMeanwhile", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.HoldExpiry = seqbox.HoldExpiryBlock })
		c := e.consumer()
		e.deliver(c, ordEvent("v1", k, 1, "t"), 1)
		require.Equal(t, []string{"v3:held"}, ordSummary(e.deliver(c, ordEvent("v3", k, 3, "t"), 1)))
		e.clock.Advance(2 * time.Minute)
		due, err := e.st.Executor().ParkedListDue(e.ctx, store.ParkedListDueParams{Consumer: e.cfg.Name, Now: e.clock.Now()})
		require.NoError(t, err)
		require.Len(t, due, 1, "v3 is due")
		// v2 closes the gap before the sweeper's transaction runs.
		require.Equal(t, []string{"v2:applied", "v3:applied"}, ordSummary(e.deliver(c, ordEvent("v2", k, 2, "t"), 1)))
		results, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, results)
		e.requireKey(k, ordV(3), false, 0, 0)
	})
	t.Run("HoldExpiryWaitsForARetryingPredecessor", func(t *testing.T) {
		e := ordSetup(t, open, func(c *seqbox.Config) { c.HoldExpiry = seqbox.HoldExpiryAdvance })
		h := newOrdHandler(e.cfg.Name)
		c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })
		e.deliver(c, ordEvent("v5", k, 5, "t"), 1)
		require.Equal(t, []string{"v7:held"}, ordSummary(e.deliver(c, ordEvent("v7", k, 7, "t"), 1)))
		e.clock.Advance(58 * time.Second)
		h.failOnce("v6")
		raw6 := ordEvent("v6", k, 6, "t")
		require.Equal(t, []string{"v6:retry"}, ordSummary(e.deliver(c, raw6, 1)))
		e.clock.Advance(3 * time.Second) // v7's hold is due, but v6 is only retrying
		results, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, results, "no gap may be recorded for a version that is retrying")
		require.Equal(t, []string{"v6:applied", "v7:applied"}, ordSummary(e.deliver(c, raw6, 2)))
		require.Empty(t, e.gapLines(k))
	})
	t.Run("UnparkedMessageBacksOffInsteadOfBurningAttempts", func(t *testing.T) {
		e := ordSetup(t, open)
		h := newOrdHandler(e.cfg.Name)
		c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })
		e.deliver(c, ordEvent("v1", k, 1, "t"), 1)
		e.deliver(c, ordEvent("v3", k, 3, "t"), 1)
		h.failOnce("v3")
		results := e.deliver(c, ordEvent("v2", k, 2, "t"), 1)
		require.Equal(t, []string{"v2:applied", "v3:retry"}, ordSummary(results), "one attempt, then it waits")
		results, err := c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Empty(t, results, "its backoff has not passed")
		e.clock.Advance(time.Second)
		results, err = c.Sweep(e.ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"v3:applied"}, ordSummary(results))
		require.Equal(t, 2, h.calls["v3"])
		e.requireNothingParked()
	})
	t.Run("TransportRedeliveriesAreNotFailures", func(t *testing.T) {
		e := ordSetup(t, open)
		h := newOrdHandler(e.cfg.Name)
		h.failOnce("x")
		c := e.consumer(func(c *seqbox.Config) { c.Handler = h.handle })
		raw := ordEvent("x", k, 1, "t")
		// The fifth delivery (four were lost to others' trouble) fails once:
		// that is its first failure, not its last.
		require.Equal(t, []string{"x:retry"}, ordSummary(e.deliver(c, raw, 5)))
		require.Equal(t, []string{"x:applied"}, ordSummary(e.deliver(c, raw, 6)))
	})
	t.Run("CrashLoopIsDeadLettered", func(t *testing.T) {
		e := ordSetup(t, open)
		c := e.consumer()
		results := e.deliver(c, ordEvent("x", k, 1, "t"), 4*e.cfg.Retry.MaxAttempts+1)
		require.Equal(t, []string{"x:dead_lettered"}, ordSummary(results))
		require.Contains(t, results[0].Reason, "crash loop")
	})
	t.Run("SkipRejectedWithUnknownKey", func(t *testing.T) {
		e := ordSetup(t, open)
		c := e.consumer()
		results := e.deliver(c, []byte(`{"id":"r","source":"s","type":"t","partitionkey":"never-seen","objectversion":"x"}`), 1)
		require.Equal(t, seqboxtype.Rejected, results[0].Outcome)
		letters, err := e.st.Executor().DeadLetterList(e.ctx, store.DeadLetterListParams{Consumer: e.cfg.Name, All: false})
		require.NoError(t, err)
		require.Len(t, letters, 1)
		_, err = c.Skip(e.ctx, letters[0].Seq, "alice", "bad producer")
		require.NoError(t, err)
		letters, err = e.st.Executor().DeadLetterList(e.ctx, store.DeadLetterListParams{Consumer: e.cfg.Name, All: false})
		require.NoError(t, err)
		require.Empty(t, letters)
	})
	t.Run("SkipUnversionedRecordsNoGap", func(t *testing.T) {
		e := ordSetup(t, open)
		c := e.consumer()
		e.deliver(c, ordEvent("v5", k, 5, "t"), 1)
		require.Equal(t, []string{"u:dead_lettered"}, ordSummary(e.deliver(c, ordEvent("u", k, nil, "t", ordFailPermanent()), 1)))
		require.Equal(t, []string{"v8:blocked"}, ordSummary(e.deliver(c, ordEvent("v8", k, 8, "t"), 1)))
		letters, err := e.st.Executor().DeadLetterList(e.ctx, store.DeadLetterListParams{Consumer: e.cfg.Name, All: false})
		require.NoError(t, err)
		require.Len(t, letters, 1)
		results, err := c.Skip(e.ctx, letters[0].Seq, "alice", "not needed")
		require.NoError(t, err)
		require.Empty(t, results, "v8 still waits for 6 and 7")
		require.Empty(t, e.gapLines(k), "an unversioned message leaves no version gap")
		require.Equal(t, []string{"v6:applied"}, ordSummary(e.deliver(c, ordEvent("v6", k, 6, "t"), 1)))
		require.Equal(t, []string{"v7:applied", "v8:applied"}, ordSummary(e.deliver(c, ordEvent("v7", k, 7, "t"), 1)))
	})
	t.Run("UnstorableAttributesAreRejected", func(t *testing.T) {
		e := ordSetup(t, open)
		c := e.consumer()
		long := make([]byte, seqboxtype.MaxAttributeSize+1)
		for i := range long {
			long[i] = 'x'
		}
		for name, raw := range map[string][]byte{
			"nul":  []byte(`{"id":"a\u0000b","source":"s","type":"t"}`),
			"long": []byte(`{"id":"` + string(long) + `","source":"s","type":"t"}`),
			"key":  []byte(`{"id":"k","source":"s","type":"t","partitionkey":"p\u0000"}`),
		} {
			results := e.deliver(c, raw, 1)
			require.Equal(t, seqboxtype.Rejected, results[0].Outcome, name)
		}
		letters, err := e.st.Executor().DeadLetterList(e.ctx, store.DeadLetterListParams{Consumer: e.cfg.Name, All: false})
		require.NoError(t, err)
		require.Len(t, letters, 3, "each is in the DLQ, byte for byte")
	})
}
