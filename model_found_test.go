package seqbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
)

// The protocol's model checker (internal/model) found that an identity
// dead-lettered while its call was uncertain let another identity ask for
// the same business key: the remote side could do the effect twice. The
// later one is dead-lettered instead, and never reaches the remote side.
func TestBusinessKeyTouchedUnderADeadLetterIsNotAskedAgain(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	ledger, err := effects.New(b.store, effects.Config{Timeout: time.Hour})
	require.NoError(t, err)
	var mu sync.Mutex
	calls := map[string]int{}
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		ref, err := ledger.Do(ctx, "crm.create_task", func(ctx context.Context, key string) (string, error) {
			mu.Lock()
			calls[ev.ID]++
			mu.Unlock()
			return "", errors.New("connection reset after the request was sent")
		})
		return []byte(ref), err
	}
	c := b.consumer(t)
	var last []seqboxtype.Result
	for attempt := 1; attempt <= b.cfg.Retry.MaxAttempts; attempt++ {
		last, err = c.Deliver(ctx, withBusinessKey("a", "k1", "followup:1"), attempt)
		require.NoError(t, err)
	}
	require.Equal(t, []string{"a:dead_lettered"}, outcomes(last), "a's call is uncertain until reconciled")
	results, err := c.Deliver(ctx, withBusinessKey("b", "k2", "followup:1"), 1)
	require.NoError(t, err)
	require.Equal(t, []string{"b:dead_lettered"}, outcomes(results))
	require.Contains(t, results[0].Reason, `business key "followup:1": crm/a, which settled without applying, made a call for it that took effect or may have`)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"a": 1}, calls, "b never reached the remote side")
}
