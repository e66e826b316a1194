package serve

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/seqboxtype"
)

// The gateway's ingest is a producer's write: on SQLite's one writer its
// transaction goes before a consumer's write that was waiting already, so
// that a POST waits for at most the write in progress (writeturn).
func TestIngestGoesBeforeAWaitingConsumersWrite(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "seqbox.db")
	s, err := New(ctx, Options{DB: db, Addr: "127.0.0.1:0", PurgeEvery: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	defer s.Close()
	ev, canon, err := ingestEvent([]byte(`{"specversion":"1.0","id":"e-1","source":"shop","type":"order.created","partitionkey":"o-1","objectversion":1,"data":{}}`))
	require.NoError(t, err)
	ev.Raw = canon

	turn := sqlitedb.Turn(db)
	release, err := turn.Take(ctx)
	require.NoError(t, err)
	found := make(chan int, 1) // the queue's ready messages the consumer's write finds
	go func() {
		r, err := turn.Take(ctx)
		if err != nil {
			t.Error(err)
			found <- -1
			return
		}
		defer r()
		ready, _, err := s.queue.Depth(ctx)
		if err != nil {
			t.Error(err)
		}
		found <- ready
	}()
	waitfor.That(t, 10*time.Second, "the consumer's write waiting", func() bool { return turn.Waiters() == 1 })

	published := make(chan error, 1)
	req := &pubReq{evs: []seqboxtype.Event{ev}, err: make(chan error, 1)}
	go func() { published <- s.publishAccepting(ctx, []*pubReq{req}) }()
	waitfor.That(t, 10*time.Second, "the ingest waiting behind it", func() bool { return turn.Waiters() == 2 })

	release()
	require.NoError(t, <-published)
	require.Equal(t, 1, <-found, "the ingest committed first")
	require.True(t, req.accepted[0].New)
}
