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
	s, db := idleServer(t)
	ev := ingestable(t, "e-1")

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
	req := &pubReq{evs: ev, err: make(chan error, 1)}
	go func() { published <- s.publishAccepting(ctx, &pubGroup{reqs: []*pubReq{req}, n: 1}) }()
	waitfor.That(t, 10*time.Second, "the ingest waiting behind it", func() bool { return turn.Waiters() == 2 })

	release()
	require.NoError(t, <-published)
	require.Equal(t, 1, <-found, "the ingest committed first")
	require.True(t, req.accepted[0].New)
}

// A request that arrives while the ingest's transaction waits for
// SQLite's writer goes with that transaction, not with the next one.
func TestIngestRequestsThatArriveWhileItWaitsForTheWriterGoWithIt(t *testing.T) {
	ctx := context.Background()
	s, db := idleServer(t)
	sizes := make(chan int, 4)
	publish := s.publisher.publish
	s.publisher.publish = func(ctx context.Context, g *pubGroup) error {
		err := publish(ctx, g)
		sizes <- len(g.reqs)
		return err
	}
	go s.publisher.run()
	defer s.publisher.close()
	turn := sqlitedb.Turn(db)
	release, err := turn.Take(ctx)
	require.NoError(t, err)
	done := make(chan error, 2)
	go func() { _, err := s.publisher.Publish(ctx, ingestable(t, "a")); done <- err }()
	waitfor.That(t, 10*time.Second, "the first request's transaction waiting for the writer", func() bool { return turn.Waiters() == 1 })
	go func() { _, err := s.publisher.Publish(ctx, ingestable(t, "b")); done <- err }()
	waitfor.That(t, 10*time.Second, "the second request waiting for a group", func() bool { return s.publisher.waiting.Load() == 1 })
	release()
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	require.Equal(t, 2, <-sizes, "both in the transaction that waited")
}

// idleServer is a gateway on a fresh SQLite file that is not serving: no
// consumer, no publisher running, so that a test alone takes the file's
// writer turn. It returns the file's path too.
func idleServer(t *testing.T) (*Server, string) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "seqbox.db")
	s, err := New(context.Background(), Options{DB: db, Addr: "127.0.0.1:0", PurgeEvery: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, db
}

// ingestable is an event with the given id as ingest parses and queues
// it (keyed o-1, version 1).
func ingestable(t *testing.T, id string) []seqboxtype.Event {
	t.Helper()
	ev, canon, err := ingestEvent([]byte(`{"specversion":"1.0","id":"` + id + `","source":"shop","type":"order.created","partitionkey":"o-1","objectversion":1,"data":{}}`))
	require.NoError(t, err)
	ev.Raw = canon
	return []seqboxtype.Event{ev}
}
