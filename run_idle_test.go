package seqbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
)

// RunUntilIdle returns by itself once the transport is idle: every message
// applied and acknowledged, nothing left to nack.
func TestRunUntilIdleReturnsWhenIdle(t *testing.T) {
	b := setup(t)
	q := openQueue(t, b.path, 30*time.Second)
	ids := taskIDs("d", 25)
	publishTasks(t, q, ids...)
	b.cfg.Transport, b.cfg.Logger = q, quietLogger
	c := b.consumer(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.RunUntilIdle(ctx, 300*time.Millisecond))
	require.NoError(t, ctx.Err(), "it returned on its own, not at the deadline")
	require.Equal(t, len(ids), b.effects(t, ""))
	require.Equal(t, 0, unacked(t, q), "every message acknowledged")

	require.ErrorIs(t, c.RunUntilIdle(ctx, 0), seqbox.ErrInvalidConfig)
}

// DeliverBatch commits several messages at once, each decided as if
// delivered alone, in order: a duplicate within the batch, and a gap that
// a later message of the same batch closes.
func TestDeliverBatch(t *testing.T) {
	b := setup(t)
	c := b.consumer(t)
	ev := func(id string, v int) []byte {
		return []byte(`{"id":"` + id + `","source":"erp","type":"t","partitionkey":"K","objectversion":` + string(rune('0'+v)) + `}`)
	}
	out, err := c.DeliverBatch(context.Background(), [][]byte{ev("a", 1), ev("a", 1), ev("c", 3), ev("b", 2), []byte(`{`)})
	require.NoError(t, err)
	require.Len(t, out, 5)
	got := []string{}
	for _, results := range out {
		for _, res := range results {
			got = append(got, res.ID+":"+string(res.Outcome))
		}
	}
	require.Equal(t, []string{"a:applied", "a:duplicate", "c:held", "b:applied", "c:applied", ":rejected"}, got)
	require.Equal(t, 3, b.effects(t, ""))

	empty, err := c.DeliverBatch(context.Background(), nil)
	require.NoError(t, err)
	require.Empty(t, empty)
}
