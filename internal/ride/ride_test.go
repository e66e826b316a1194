package ride_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/ride"
	"github.com/seqbox/seqbox/store"
)

// A slot holds one record of its own identity at a time; Flush writes it
// alone, and once closed (the Decider returned) it holds nothing more,
// so a late call's record is written by its caller, never left behind.
func TestSlotHoldsOneRecordOfItsIdentity(t *testing.T) {
	ctx, slot := ride.With(context.Background(), "c", "s", "1")
	require.Same(t, slot, ride.From(ctx))
	require.Nil(t, ride.From(context.Background()), "no slot outside a Decider")
	require.False(t, ride.From(context.Background()).Hold("c", "s", "1", ride.Held{}), "a nil slot holds nothing")

	var wrote []string
	held := func(key string) ride.Held {
		return ride.Held{Params: store.EffectRecordParams{IdempotencyKey: key},
			Record: func(context.Context) error { wrote = append(wrote, key); return nil }}
	}
	require.False(t, slot.Hold("c", "s", "2", held("other")), "another identity's call writes its own")
	require.True(t, slot.Hold("c", "s", "1", held("a")))
	require.False(t, slot.Hold("c", "s", "1", held("b")), "one record at a time")
	require.NoError(t, slot.Flush(ctx))
	require.Equal(t, []string{"a"}, wrote, "Flush writes the held record")
	require.NoError(t, slot.Flush(ctx), "nothing held: nothing written")
	require.Equal(t, []string{"a"}, wrote)

	require.True(t, slot.Hold("c", "s", "1", held("c")))
	h := slot.Close()
	require.NotNil(t, h)
	require.Equal(t, "c", h.Params.IdempotencyKey)
	require.False(t, slot.Hold("c", "s", "1", held("late")), "closed: a late call writes its own record")
	require.Nil(t, slot.Close())
}
