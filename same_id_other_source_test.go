package seqbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
)

// Two sources may use the same ids ("123" in two systems of record), and a
// key's turn belongs to an identity, source and id. A message of another
// source that carries the turn holder's id waits behind it like any
// other: the sweep that finds its hold run out does not let it out while
// the holder retries, and it reaches the agent only after the holder
// applied. Before this test, a mutant of that check in unpark.go
// (nextParked compared the ids only when the sources matched) survived
// every suite: the sweep let b/x out, and it reached the agent and
// applied while a/x, earlier on the key, still retried.
func TestMessageWithTheTurnHoldersIDFromAnotherSourceWaitsBehindIt(t *testing.T) {
	b := setup(t)
	clock := newFoundClock()
	var mu sync.Mutex
	var asked []string
	failed := false
	b.cfg.Now = clock.Now
	b.cfg.Decide = func(_ context.Context, ev seqboxtype.Event) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, ev.Source+"/"+ev.ID)
		if ev.Source == "a" && !failed {
			failed = true
			return nil, errors.New("the model answered 503")
		}
		return []byte("plan"), nil
	}
	b.cfg.HoldTimeout, b.cfg.Retry.MaxAttempts = time.Minute, 5
	b.cfg.HoldExpiry = seqbox.HoldExpiryAdvance
	c := b.consumer(t)
	ax := []byte(`{"id":"x","source":"a","type":"t","partitionkey":"opp"}`)
	bx := []byte(`{"id":"x","source":"b","type":"t","partitionkey":"opp"}`)
	require.Equal(t, []string{"x:retry"}, outcomes(mustDeliver(t, c, ax, 1)))
	held := mustDeliver(t, c, bx, 1)
	require.Equal(t, []string{"x:held"}, outcomes(held), "b/x waits behind a/x: %s", held[0].Reason)

	clock.Advance(2 * time.Minute)
	swept, err := c.Sweep(context.Background())
	require.NoError(t, err)
	require.Empty(t, swept, "b/x's hold ran out, but a/x holds the key's turn while it retries")
	mu.Lock()
	require.Equal(t, []string{"a/x"}, asked, "b/x did not reach the agent before a/x applied")
	mu.Unlock()

	results := mustDeliver(t, c, ax, 2)
	got := make([]string, len(results))
	for i, r := range results {
		got[i] = r.Source + "/" + r.ID + ":" + string(r.Outcome)
	}
	require.Equal(t, []string{"a/x:applied", "b/x:applied"}, got, "a/x applies, then lets b/x out")
	require.Equal(t, []string{"a/x", "a/x", "b/x"}, asked)
}
