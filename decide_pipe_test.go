package seqbox_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
)

// A slow decision holds its own key, not the worker that took it: with one
// worker, a key received after a message whose Decide is still running is
// decided and applied meanwhile (Run's decide pipe, docs/design.md §10).
// Before the pipe the worker waited in its batch until the slow decision
// was in, so b stayed unread behind it.
func TestSlowDecisionDoesNotHoldTheWorker(t *testing.T) {
	b := setup(t)
	q := openQueue(t, filepath.Join(filepath.Dir(b.path), "queue.db"), time.Minute)
	release := make(chan struct{})
	started := make(chan string, 4)
	b.cfg.Transport, b.cfg.Workers = q, 1
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		started <- ev.ID
		if ev.ID == "a" {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return []byte("plan for " + ev.ID), nil
	}
	c := b.consumer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, q.Publish(ctx, keyed("a", "k1", 1)))
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	require.Equal(t, "a", <-started)
	require.NoError(t, q.Publish(ctx, keyed("b", "k2", 1)))
	select {
	case id := <-started:
		require.Equal(t, "b", id)
	case <-time.After(20 * time.Second): // a failure detector, not a timing assertion
		t.Fatal("b was not decided while a's decision ran: the worker waited for it")
	}
	waitfor.That(t, 20*time.Second, "b applied while a is being decided", func() bool { return b.effects(t, "b") == 1 })
	require.Equal(t, 0, b.effects(t, "a"), "a applied before its decision came in")
	close(release)
	waitfor.That(t, 20*time.Second, "a applied once decided", func() bool { return b.effects(t, "a") == 1 })
	cancel()
	require.NoError(t, <-errc)
}
