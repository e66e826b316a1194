package embedded

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/stretchr/testify/require"
)

// An idle Receive looks for a ready message on a reader, not in SQLite's
// one writer's turn: its polls leave the turn to the process's writes (a
// poll that leases walks every leased message, 0.3 ms of the writer's
// time at 1,000 in flight, a tenth of it in an agent run;
// docs/benchmarks-history.md §37). Only the first look of a Receive,
// and a look after a wake-up, lease directly. A message made ready
// where no wake-up reaches (another process) is still received at the
// next poll.
func TestIdlePollsLeaveTheWriterAlone(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := Open(ctx, path, Config{Name: "idle", PollInterval: time.Millisecond, Wait: 150 * time.Millisecond})
	require.NoError(t, err)
	defer q.Close()
	before := q.turn.Taken()
	ds, err := q.Receive(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, ds)
	require.LessOrEqual(t, q.turn.Taken()-before, uint64(1), "one lease: the Receive's first look")

	// Written as another process would: no wake-up in this one.
	patient, err := Open(ctx, path, Config{Name: "idle", PollInterval: time.Millisecond, Wait: time.Minute})
	require.NoError(t, err)
	defer patient.Close()
	got := make(chan int, 1)
	go func() {
		ds, _ := patient.Receive(ctx, 10)
		got <- len(ds)
	}()
	waitfor.That(t, time.Minute, "the Receive idle", func() bool { return patient.waiting.Load() > 0 })
	_, err = q.db.ExecContext(ctx, `INSERT INTO seqbox_queue (queue, body, visible_at, enqueued_at, msg_group) VALUES ('idle', x'7b7d', 0, 0, '')`)
	require.NoError(t, err)
	require.Equal(t, 1, <-got)
}
