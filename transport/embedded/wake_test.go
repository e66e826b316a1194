package embedded

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/transport"
)

// A Receive waiting for messages wakes as soon as a Queue on it in this
// process publishes or nacks one without delay, not at its next poll (an
// hour here), and a Close wakes it to say so.
func TestIdleReceiveWakesOnPublish(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"), Config{Name: "wake", PollInterval: time.Hour, Wait: 2 * time.Hour})
	require.NoError(t, err)
	defer q.Close()

	type received struct {
		ds  []transport.Delivery
		err error
	}
	// waiting starts a Receive and returns once it waits.
	waiting := func() chan received {
		c := make(chan received, 1)
		go func() {
			ds, err := q.Receive(ctx, 10)
			c <- received{ds, err}
		}()
		for q.waiting.Load() != 1 {
			runtime.Gosched()
		}
		return c
	}
	bodies := func(r received) []string {
		require.NoError(t, r.err)
		var out []string
		for _, d := range r.ds {
			out = append(out, string(d.Body()))
		}
		return out
	}

	r := waiting()
	require.NoError(t, q.Publish(ctx, []byte("one")))
	first := <-r
	require.Equal(t, []string{"one"}, bodies(first))

	r = waiting()
	require.NoError(t, q.PublishGrouped(ctx, [][]byte{[]byte("two"), []byte("three")}, []string{"g", "h"}))
	require.Equal(t, []string{"two", "three"}, bodies(<-r))

	r = waiting()
	require.NoError(t, first.ds[0].Nack(ctx, 0))
	require.Equal(t, []string{"one"}, bodies(<-r), "a nack without delay")

	// Another Queue on the same file and name, in this process.
	path := filepath.Join(filepath.Dir(q.location), "q.db")
	other, err := Open(ctx, path, Config{Name: "wake"})
	require.NoError(t, err)
	defer other.Close()
	r = waiting()
	require.NoError(t, other.Publish(ctx, []byte("four")))
	require.Equal(t, []string{"four"}, bodies(<-r), "a publish through another Queue on it")

	r = waiting()
	require.NoError(t, q.Close())
	require.ErrorIs(t, (<-r).err, transport.ErrClosed)
}
