package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/seqbox/seqbox/internal/waitfor"
)

// A publish is a producer's write: on the file's one writer it goes
// before a consumer's write that was waiting already (writeturn).
func TestAPublishGoesBeforeAWaitingConsumersWrite(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	turn := sqlitedb.Turn(b.path)
	release, err := turn.Take(ctx)
	require.NoError(t, err)

	// A consumer's write waits for the turn and notes the queue's depth
	// it finds in it.
	found := make(chan [2]int, 1)
	go func() {
		r, err := turn.Take(ctx)
		if err != nil {
			t.Error(err)
			found <- [2]int{-1, -1}
			return
		}
		defer r()
		ready, leased, err := b.q.Depth(ctx)
		if err != nil {
			t.Error(err)
		}
		found <- [2]int{ready, leased}
	}()
	waitfor.That(t, 10*time.Second, "the consumer's write waiting", func() bool { return turn.Waiters() == 1 })

	published := make(chan error, 1)
	go func() { published <- b.q.Publish(ctx, []byte(`{"n":1}`)) }()
	waitfor.That(t, 10*time.Second, "the publish waiting behind it", func() bool { return turn.Waiters() == 2 })

	release()
	require.NoError(t, <-published)
	require.Equal(t, [2]int{1, 0}, <-found, "the publish committed first")
}
