package seqbox_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/seqboxtype"
)

// Copies of one message in one batch (a broker that redelivered it while
// the first copy was still in flight) share one decision: the model is
// asked once for them, and a failure spends one attempt, however the
// decision goroutines happen to be scheduled. Before, a copy shared its
// twin's call only if it asked while that call still ran: on one
// processor (GOMAXPROCS=1 here; a loaded machine gets there too, as a CI
// run of TestBatchMatchesOneByOne did) each copy's call had ended before
// the next copy asked, and eight copies asked the model eight times, each
// failure an attempt of its own: a transient error could spend a
// message's attempts within one batch.
func TestCopiesInABatchShareOneDecision(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	b := setup(t)
	var calls atomic.Int32
	b.cfg.Decide = func(context.Context, seqboxtype.Event) ([]byte, error) {
		calls.Add(1)
		return nil, errors.New("the model answered 503")
	}
	b.cfg.Retry.MaxAttempts = 5
	c := b.consumer(t)
	raw := unversioned("u", "opp")
	raws := [][]byte{raw, raw, raw, raw, raw, raw, raw, raw}
	results, err := c.DeliverBatch(context.Background(), raws)
	require.NoError(t, err)
	require.Equal(t, int32(1), calls.Load(), "the model asked once for the batch's copies")
	for i, rs := range results {
		require.Equal(t, seqboxtype.Retry, rs[0].Outcome, "copy %d: %s", i, rs[0].Reason)
	}

	// The next delivery is the second attempt, not the ninth.
	again, err := c.Deliver(context.Background(), raw, 2)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Retry, again[0].Outcome, again[0].Reason)
	require.Contains(t, again[0].Reason, "attempt 2 of 5")
}
