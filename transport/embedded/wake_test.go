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

// An acknowledgement wakes the idle Receives only when it may have made a
// message ready: a group's head acknowledged while the message after it
// waits. An ungrouped message's leaves nothing behind it, and a head
// whose next message its holder took already (TakeNext) leaves that one
// leased: a wake then only sent every idle receiver to lease nothing, in
// the one writer's turn (an ack in every stage of the agent path).
func TestAckWakesOnlyWhenItReadiesAMessage(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"), Config{Name: "wake", PollInterval: time.Hour, Wait: 2 * time.Hour})
	require.NoError(t, err)
	defer q.Close()
	woken := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	receive := func(n int) []transport.Delivery {
		ds, err := q.Receive(ctx, 10)
		require.NoError(t, err)
		require.Len(t, ds, n)
		return ds
	}

	require.NoError(t, q.PublishBatch(ctx, [][]byte{[]byte("a"), []byte("b")}))
	ds := receive(2)
	ch := q.readied()
	require.NoError(t, q.AckBatch(ctx, ds[:1]))
	require.False(t, woken(ch), "an ungrouped message's ack readies nothing")
	tx, err := q.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, q.AckIn(ctx, tx, ds[1:]))
	require.NoError(t, tx.Commit())
	q.AckCommitted(ds[1:])
	require.False(t, woken(ch), "nor in a transaction")

	require.NoError(t, q.PublishGrouped(ctx, [][]byte{[]byte("g1"), []byte("g2"), []byte("h1"), []byte("h2")}, []string{"g", "g", "h", "h"}))
	heads := receive(2) // g1 and h1
	next, err := q.TakeNext(ctx, heads[1:])
	require.NoError(t, err)
	require.Len(t, next, 1, "h2, taken for h1")
	ch = q.readied()
	require.NoError(t, q.AckBatch(ctx, heads[1:]))
	require.False(t, woken(ch), "h1's ack: h2 is leased already")
	require.NoError(t, q.AckBatch(ctx, heads[:1]))
	require.True(t, woken(ch), "g1's ack readies g2")
	require.Equal(t, "g2", string(receive(1)[0].Body()))

	// A taken next message settled before its head: the head's ack
	// readies the one after it (acked), or the next itself (nacked).
	for _, settle := range []string{"ack", "nack"} {
		group := "s-" + settle
		require.NoError(t, q.PublishGrouped(ctx, [][]byte{[]byte(group + "1"), []byte(group + "2"), []byte(group + "3")}, []string{group, group, group}))
		head := receive(1)
		next, err := q.TakeNext(ctx, head)
		require.NoError(t, err)
		require.Len(t, next, 1)
		if settle == "ack" {
			require.NoError(t, q.AckBatch(ctx, next))
		} else {
			require.NoError(t, next[0].Nack(ctx, 0))
		}
		ch = q.readied()
		require.NoError(t, q.AckBatch(ctx, head))
		require.True(t, woken(ch), "the head's ack after its taken next was %sed", settle)
		want := group + "3"
		if settle == "nack" {
			want = group + "2"
		}
		got := receive(1)
		require.Equal(t, want, string(got[0].Body()))
		require.NoError(t, q.AckBatch(ctx, got))
		if settle == "nack" {
			require.NoError(t, q.AckBatch(ctx, receive(1)))
		}
	}
}

// Close while an idle Receive prepares its look or its lease: the
// statements are read once their prepare is through, not beside it (go
// test -race).
func TestCloseWhileAReceivePrepares(t *testing.T) {
	ctx := context.Background()
	for range 20 {
		q, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"), Config{Name: "race", PollInterval: time.Microsecond, Wait: time.Hour})
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := q.Receive(ctx, 1)
			done <- err
		}()
		require.NoError(t, q.Close())
		require.ErrorIs(t, <-done, transport.ErrClosed)
	}
}
