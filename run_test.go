package seqbox_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
)

// appliedLog records the order messages were applied in.
type appliedLog struct {
	mu    sync.Mutex
	order []string
	// applied, when set, is called with the count so far after each.
	applied func(n int)
}

func (l *appliedLog) observe(res seqboxtype.Result) {
	if res.Outcome != seqboxtype.Applied {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.order = append(l.order, res.ID)
	if l.applied != nil {
		l.applied(len(l.order))
	}
}

func keyed(id, key string, v int) []byte {
	return fmt.Appendf(nil, `{"id":%q,"source":"crm","type":"t","partitionkey":%q,"objectversion":%d}`, id, key, v)
}

// A key whose agent decision takes long (a model call) does not stall the
// other keys: its decision runs outside the transaction, its batch-mates
// commit without it, and other workers keep going.
func TestSlowDecisionDoesNotStallOtherKeys(t *testing.T) {
	b := setup(t)
	q := openQueue(t, filepath.Join(filepath.Dir(b.path), "queue.db"), 10*time.Second)
	// The slow key's model call lasts until every fast message applied:
	// were the fast keys stalled behind it, it would run out its
	// (generous) limit instead and the test fails.
	fastApplied := make(chan struct{})
	log := &appliedLog{applied: func(n int) {
		if n == 30 {
			close(fastApplied)
		}
	}}
	var stalled atomic.Bool
	var decided sync.Map
	b.cfg.Transport, b.cfg.Workers, b.cfg.BatchSize = q, 2, 8
	b.cfg.Observer = log.observe
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		decided.Store(ev.ID, true)
		if ev.PartitionKey == "slow" {
			select {
			case <-fastApplied:
			case <-time.After(15 * time.Second): // within runUntil's limit
				stalled.Store(true)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return []byte("plan for " + ev.ID), nil
	}
	var seenDecision sync.Map
	record := b.cfg.Handler
	b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		d, ok := seqbox.DecisionFrom(ctx)
		if !ok || string(d) != "plan for "+ev.ID {
			return fmt.Errorf("handler for %s got decision %q, %v", ev.ID, d, ok)
		}
		seenDecision.Store(ev.ID, true)
		return record(ctx, tx, ev)
	}
	ctx := context.Background()
	require.NoError(t, q.Publish(ctx, keyed("slow-1", "slow", 1)))
	for i := range 30 {
		require.NoError(t, q.Publish(ctx, keyed(fmt.Sprintf("fast-%d", i), fmt.Sprintf("k%d", i%6), i/6+1)))
	}
	require.NoError(t, runUntil(t, b.consumer(t), func() bool { return unacked(t, q) == 0 }))

	require.False(t, stalled.Load(), "the fast keys waited for the slow key's decision: applied %v", log.order)
	require.Len(t, log.order, 31)
	require.Equal(t, "slow-1", log.order[30], "the slow key applies last: %v", log.order)
	for i := range 30 {
		id := fmt.Sprintf("fast-%d", i)
		_, ok := seenDecision.Load(id)
		require.True(t, ok)
	}
	require.Equal(t, 31, b.effects(t, ""))
}

// Keys that trickle in among a flood of one hot key are applied close to
// when they arrive, not after the hot backlog, and the hot key stays in
// order. (The scheduler's share and pinning rules are unit-tested in
// scheduler_internal_test.go.)
func TestHotKeyDoesNotStarveOthers(t *testing.T) {
	b := setup(t)
	q := openQueue(t, filepath.Join(filepath.Dir(b.path), "queue.db"), 10*time.Second)
	log := &appliedLog{}
	b.cfg.Transport, b.cfg.Workers, b.cfg.BatchSize = q, 1, 8
	b.cfg.Observer = log.observe
	ctx := context.Background()
	var bodies [][]byte
	arrived := map[string]int{}
	v := 0
	for i := range 10 {
		for range 20 {
			v++
			bodies = append(bodies, keyed(fmt.Sprintf("hot-%d", v), "hot", v))
		}
		id := fmt.Sprintf("cold-%d", i)
		arrived[id] = len(bodies)
		bodies = append(bodies, keyed(id, fmt.Sprintf("cold%d", i), 1))
	}
	require.NoError(t, q.PublishBatch(ctx, bodies))
	require.NoError(t, runUntil(t, b.consumer(t), func() bool { return unacked(t, q) == 0 }))

	require.Len(t, log.order, 210)
	pos := map[string]int{}
	for i, id := range log.order {
		pos[id] = i
	}
	for v := 2; v <= 200; v++ {
		require.Less(t, pos[fmt.Sprintf("hot-%d", v-1)], pos[fmt.Sprintf("hot-%d", v)], "hot key out of order")
	}
	// Each cold key is applied at most one prefetch window (2 batches) and
	// one batch after it arrived, however long the hot backlog is.
	for id, at := range arrived {
		require.LessOrEqual(t, pos[id], at+3*8, "%s arrived at %d but applied at %d", id, at, pos[id])
	}
	// And the hot key was really behind: its last version applied last.
	require.Equal(t, "hot-200", log.order[209])
}
