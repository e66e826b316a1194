package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/testclock"
	"github.com/seqbox/seqbox/transport"

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

// The holder of a group's head can take the message right after it before
// it acknowledges the head (TakeNext), and nobody else can: the next one
// is ready only once taken or once the head is gone. A head whose lease
// ran out, or that was nacked, takes nothing; nor does one without a
// group, or whose next message is not ready.
func TestQueueTakesTheNextOfAGroupForItsHeadsHolder(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testTakeNext(t, setup(t)) })
	t.Run("postgres", func(t *testing.T) {
		b := &queueBundle{path: pgtest.URL(t), clock: testclock.At(time.Date(2026, 10, 9, 12, 0, 0, 0, time.UTC))}
		b.q = b.open(t, "default")
		testTakeNext(t, b)
	})
}

func testTakeNext(t *testing.T, b *queueBundle) {
	other := b.open(t, "default") // a competing receiver on the same queue
	ctx := context.Background()
	take := func(heads ...transport.Delivery) []transport.Delivery {
		t.Helper()
		ds, err := b.q.TakeNext(ctx, heads)
		require.NoError(t, err)
		return ds
	}
	require.NoError(t, b.q.PublishGrouped(ctx, [][]byte{[]byte("a1"), []byte("a2"), []byte("b1"), []byte("x"), []byte("a3"), []byte("c1"), []byte("c2")},
		[]string{"a", "a", "b", "", "a", "c", "c"}))
	heads := receive(t, b.q, 10)
	require.Equal(t, []string{"a1", "b1", "x", "c1"}, bodies(heads))
	a1, b1, x, c1 := heads[0], heads[1], heads[2], heads[3]
	require.NoError(t, c1.Nack(ctx, time.Hour))
	next := take(a1, b1, x, c1)
	require.Equal(t, []string{"a2"}, bodies(next), "b1 has no next, x no group, c1 is no longer held")
	require.Equal(t, 1, next[0].Attempt())
	require.Empty(t, take(a1), "a2 is leased now: a1 takes nothing more")
	require.Empty(t, receive(t, other, 10), "nobody else gets a2 or a3")

	require.NoError(t, a1.Ack(ctx))
	a2 := next[0]
	require.Equal(t, []string{"a3"}, bodies(take(a2)), "a2, the head now, takes a3")

	// A head whose lease ran out takes nothing: another receiver may hold
	// its group now.
	require.NoError(t, b.q.PublishGrouped(ctx, [][]byte{[]byte("d1"), []byte("d2")}, []string{"d", "d"}))
	d := receive(t, b.q, 10)
	require.Equal(t, []string{"d1"}, bodies(d))
	b.clock.Advance(lease + time.Second)
	require.Empty(t, take(d[0]))
	got := receive(t, other, 10)
	require.Contains(t, bodies(got), "d1", "d1 is redelivered to the other receiver")
	require.NotContains(t, bodies(got), "d2")
	require.Empty(t, take(), "no heads, nothing taken")
}
