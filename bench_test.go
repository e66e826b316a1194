package seqbox_test

// Benchmarks of the pipeline side by side with the raw limit of the same
// database: run them together, e.g.
//
//	go test -run '^$' -bench . -benchtime 5000x
//
// and compare the msgs/s each reports. PostgreSQL runs when
// SEQBOX_TEST_POSTGRES_URL is set. `seqbox bench throughput` prints the
// same comparison with latency percentiles.

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/bench"
	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/transport/embedded"
)

const (
	benchKeys    = 100
	benchBatch   = 64
	benchWorkers = 4
)

// benchDBs runs fn once per store: SQLite in a fresh file, and PostgreSQL
// in a fresh schema.
func benchDBs(b *testing.B, fn func(b *testing.B, db string)) {
	b.Run("sqlite", func(b *testing.B) { fn(b, filepath.Join(b.TempDir(), "seqbox.db")) })
	b.Run("postgres", func(b *testing.B) { fn(b, pgtest.URL(b)) })
}

func openBenchStore(b *testing.B, db string) store.Store {
	b.Helper()
	ctx := context.Background()
	st, err := dbopen.Store(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := replay.EnsureRecordTables(ctx, st.DB()); err != nil {
		b.Fatal(err)
	}
	return st
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkRawInsert is the floor: plain INSERTs of the same messages,
// benchBatch per transaction, benchWorkers writers, same durability.
func BenchmarkRawInsert(b *testing.B) {
	benchDBs(b, func(b *testing.B, db string) {
		st := openBenchStore(b, db)
		bodies := bench.Bodies("bench", "r", "raw", b.N, benchKeys)
		b.ResetTimer()
		if _, err := bench.RawInsert(context.Background(), st.DB(), postgres.IsURL(db), "raw", bodies, benchBatch, benchWorkers); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		reportRate(b)
	})
}

// BenchmarkDeliver is one message per transaction: what replay and HTTP
// ingest pay without batching.
func BenchmarkDeliver(b *testing.B) {
	benchDBs(b, func(b *testing.B, db string) {
		st := openBenchStore(b, db)
		c, err := seqbox.NewConsumer(seqbox.Config{Name: "bench", Store: st, Handler: replay.RecordHandlerOn(st.DB(), "bench")})
		if err != nil {
			b.Fatal(err)
		}
		bodies := bench.Bodies("bench", "d", "deliver", b.N, benchKeys)
		ctx := context.Background()
		b.ResetTimer()
		for i := range b.N {
			results, err := c.Deliver(ctx, bodies[i], 1)
			if err != nil {
				b.Fatal(err)
			}
			if results[0].Outcome != seqboxtype.Applied {
				b.Fatalf("message %d: %s (%s)", i, results[0].Outcome, results[0].Reason)
			}
		}
		b.StopTimer()
		reportRate(b)
	})
}

// BenchmarkRunBatch is Consumer.Run end to end on the embedded queue
// (receive, one transaction per batch, commit, ack), the messages
// published beforehand.
func BenchmarkRunBatch(b *testing.B) {
	benchDBs(b, func(b *testing.B, db string) {
		ctx := context.Background()
		st := openBenchStore(b, db)
		q, err := embedded.Open(ctx, db, embedded.Config{Name: "bench", Wait: 100 * time.Millisecond, PollInterval: 5 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { q.Close() })
		if err := q.PublishBatch(ctx, bench.Bodies("bench", "r", "run", b.N, benchKeys)); err != nil {
			b.Fatal(err)
		}
		var applied, other atomic.Int64
		all := make(chan struct{})
		c, err := seqbox.NewConsumer(seqbox.Config{Name: "bench", Store: st, Transport: q, Handler: replay.RecordHandlerOn(st.DB(), "bench"),
			Workers: benchWorkers, BatchSize: benchBatch, Logger: quietLogger,
			Observer: func(res seqboxtype.Result) {
				if res.Outcome != seqboxtype.Applied {
					other.Add(1)
				} else if applied.Add(1) == int64(b.N) {
					close(all)
				}
			}})
		if err != nil {
			b.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		b.ResetTimer()
		go func() { done <- c.Run(rctx) }()
		select {
		case <-all:
		case <-time.After(5 * time.Minute):
			b.Errorf("applied %d of %d in 5m (%d other outcomes)", applied.Load(), b.N, other.Load())
		}
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if other.Load() != 0 {
			b.Fatalf("%d deliveries were not applied", other.Load())
		}
		reportRate(b)
	})
}
