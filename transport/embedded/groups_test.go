package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A group's messages are received one at a time, in publication order,
// each once the one before it is acknowledged, whoever holds it; other
// groups and ungrouped messages flow meanwhile. A lease that runs out or
// a nack keeps the group's head in front.
func TestQueueGroupsHandOutOneMessageAtATime(t *testing.T) {
	b := setup(t)
	other := b.open(t, "default") // a competing receiver on the same queue
	ctx := context.Background()
	require.NoError(t, b.q.PublishGrouped(ctx, [][]byte{[]byte("a1"), []byte("a2"), []byte("b1"), []byte("x"), []byte("a3")},
		[]string{"a", "a", "b", "", "a"}))
	first := receive(t, b.q, 10)
	require.Equal(t, []string{"a1", "b1", "x"}, bodies(first), "one head per group, and the ungrouped message")
	require.Empty(t, receive(t, other, 10), "a2 waits while a1 is held, even by another receiver")
	require.NoError(t, first[1].Ack(ctx))
	require.NoError(t, first[2].Ack(ctx))

	// a1 is given back (a nack, a lease that ran out): it comes back
	// before a2, never after.
	require.NoError(t, first[0].Nack(ctx, time.Second))
	require.Empty(t, receive(t, other, 10), "a1 waits out its delay; a2 stays behind it")
	b.clock.Advance(2 * time.Second)
	again := receive(t, other, 10)
	require.Equal(t, []string{"a1"}, bodies(again))
	require.NoError(t, again[0].Ack(ctx))
	next := receive(t, b.q, 10)
	require.Equal(t, []string{"a2"}, bodies(next))
	b.clock.Advance(lease + time.Second) // a2's lease runs out: redelivered, still ahead of a3
	require.Equal(t, []string{"a2"}, bodies(receive(t, other, 10)))
	require.ErrorContains(t, b.q.PublishGrouped(ctx, [][]byte{[]byte("z")}, nil), "0 groups for 1 messages")
}
