package seqbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
)

// A handler that fails inside a batch makes the batch run again with
// savepoints. The failing handler is asked once: its failure is recorded
// as it was, even though a second call would have succeeded. Its batch
// mates apply exactly once, whatever number of calls that took, and
// nothing of the failed delivery commits.
func TestBatchHandlerFailureRerunsWithoutAskingAgain(t *testing.T) {
	b := setup(t)
	record := replay.RecordHandler(b.cfg.Name)
	var mu sync.Mutex
	calls := map[string]int{}
	b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		mu.Lock()
		calls[ev.ID]++
		n := calls[ev.ID]
		mu.Unlock()
		if ev.ID == "k2-v1" && n == 1 {
			// Fails on its first call only: asked again, it would apply.
			return errors.New("model timeout")
		}
		return record(ctx, tx, ev)
	}
	c := b.consumer(t)
	var raws [][]byte
	for _, k := range []string{"k1", "k2", "k3"} {
		for v := 1; v <= 2; v++ {
			raws = append(raws, fmt.Appendf(nil, `{"id":"%s-v%d","source":"erp","type":"t","partitionkey":"%s","objectversion":%d}`, k, v, k, v))
		}
	}
	out, err := c.DeliverBatch(context.Background(), raws)
	require.NoError(t, err)
	got := map[string]seqboxtype.Outcome{}
	for _, results := range out {
		for _, res := range results {
			got[res.ID] = res.Outcome
		}
	}
	require.Equal(t, map[string]seqboxtype.Outcome{
		"k1-v1": seqboxtype.Applied, "k1-v2": seqboxtype.Applied,
		"k2-v1": seqboxtype.Retry, "k2-v2": seqboxtype.Held, // waits behind its retrying predecessor
		"k3-v1": seqboxtype.Applied, "k3-v2": seqboxtype.Applied,
	}, got)
	require.Equal(t, 1, calls["k2-v1"], "the failed handler is not asked again in the rerun")
	require.Equal(t, 0, b.effects(t, "k2-v1"))
	require.Equal(t, 0, b.effects(t, "k2-v2"))
	for _, id := range []string{"k1-v1", "k1-v2", "k3-v1", "k3-v2"} {
		require.Equal(t, 1, b.effects(t, id), id)
	}
	require.Equal(t, 2, calls["k1-v1"], "a batch mate before the failure ran in both runs; its first run rolled back")

	// Redelivered, the failed message applies, and releases its successor.
	out, err = c.DeliverBatch(context.Background(), raws[2:3])
	require.NoError(t, err)
	require.Len(t, out[0], 2)
	require.Equal(t, seqboxtype.Applied, out[0][0].Outcome)
	require.Equal(t, "k2-v2", out[0][1].ID)
	require.Equal(t, seqboxtype.Applied, out[0][1].Outcome)
	require.Equal(t, 1, b.effects(t, "k2-v1"))
	require.Equal(t, 1, b.effects(t, "k2-v2"))
}
