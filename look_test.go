package seqbox_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/store"
)

// lookCount is a store whose executors count their DecisionLook calls.
type lookCount struct {
	store.Store
	looks *atomic.Int64
}

// OneWriter is the wrapped store's.
func (s lookCount) OneWriter() bool {
	ow, ok := s.Store.(interface{ OneWriter() bool })
	return ok && ow.OneWriter()
}

func (s lookCount) Executor() store.Executor {
	return lookCountExecutor{Executor: s.Store.Executor(), looks: s.looks}
}

type lookCountExecutor struct {
	store.Executor
	looks *atomic.Int64
}

func (e lookCountExecutor) DecisionLook(ctx context.Context, p store.MessageRef) (store.DecisionLook, error) {
	e.looks.Add(1)
	return e.Executor.DecisionLook(ctx, p)
}

// On a store with one writer, a decider whose own transaction claimed the
// message less than a heartbeat ago asks without looking again: that
// transaction read no decision under the same writer, and nothing can
// record one or settle the identity under its live claim. An older claim
// is looked at, and on PostgreSQL (READ COMMITTED) every claim is.
func TestDeciderLooksAgainOnlyWhereItsClaimMayHaveChanged(t *testing.T) {
	for _, c := range []struct {
		name      string
		bundle    func(*testing.T) *bundle
		heartbeat time.Duration
		looks     int64
	}{
		{"sqlite fresh claim", setup, time.Minute, 0},
		{"sqlite claim older than a heartbeat", setup, time.Nanosecond, 1},
		{"postgres fresh claim", setupPostgres, time.Minute, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.bundle(t)
			a := newAgent()
			var looks atomic.Int64
			b.cfg.Store, b.cfg.Decide, b.cfg.ClaimHeartbeat = lookCount{Store: b.store, looks: &looks}, a.decide, c.heartbeat
			results := mustDeliver(t, b.consumer(t), []byte(`{"id":"e1","source":"crm","type":"t","partitionkey":"opp","objectversion":1}`), 1)
			require.Equal(t, []string{"e1:applied"}, outcomes(results))
			require.Equal(t, []string{"e1"}, a.called())
			require.Equal(t, c.looks, looks.Load())
		})
	}
}
