package seqbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

// A redrive an operator asked for (the CLI's, the admin API's) retries a
// transient failure in place, up to the retry policy's attempts: it waited
// the policy's backoff even where the remote side asked for longer
// (Retry-After), so an agent answering 503 with Retry-After: 3 was asked
// again 0.2 s later and the event was dead-lettered again within a second
// (a stranger's gateway). Delivery honours it; the redrive now does too.
func TestARedriveWaitsTheRetryAfterItWasAskedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seqbox.db"))
		require.NoError(t, err)
		defer st.Close()
		require.NoError(t, replay.EnsureRecordTables(ctx, st.DB()))
		var mu sync.Mutex
		var asked []time.Time
		busy := false
		decide := func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, time.Now())
			if busy {
				return nil, seqbox.RetryAfter(errors.New("503 busy"), 3*time.Second)
			}
			return nil, seqbox.Permanent(errors.New("400 from the agent"))
		}
		c, err := seqbox.NewConsumer(seqbox.Config{Name: "test", Store: st, Handler: replay.RecordHandler("test"), Decide: decide,
			Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 2, InitialBackoff: 200 * time.Millisecond, MaxBackoff: 10 * time.Second}}})
		require.NoError(t, err)
		results, err := c.Deliver(ctx, keyed("x", "k", 1), 1)
		require.NoError(t, err)
		require.Equal(t, []string{"x:dead_lettered"}, outcomes(results))
		letters, err := st.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: "test"})
		require.NoError(t, err)
		require.Len(t, letters, 1)

		mu.Lock()
		busy, asked = true, nil
		mu.Unlock()
		_, err = st.Executor().RequestInsert(ctx, store.OperatorRequest{Consumer: "test", Action: store.ActionRedrive,
			Target: strconv.FormatInt(letters[0].Seq, 10), RequestedBy: "ops", Reason: "agent back", RequestedAt: time.Now()})
		require.NoError(t, err)
		n, err := c.RunRequests(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, asked, 2, "the redrive's two attempts")
		require.GreaterOrEqual(t, asked[1].Sub(asked[0]), 3*time.Second, "asked again before the Retry-After the agent gave")
	})
}
