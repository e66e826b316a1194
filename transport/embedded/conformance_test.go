package embedded_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/embedded"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// harness opens queues in the database where names (a fresh one per
// test).
func harness(where func(t testing.TB) string) transporttest.Harness {
	const lease = 1500 * time.Millisecond
	return transporttest.Harness{
		NewBroker: func(t testing.TB) transporttest.Broker {
			path := where(t)
			open := func(t testing.TB) *embedded.Queue {
				q, err := embedded.Open(context.Background(), path, embedded.Config{Lease: lease, PollInterval: 10 * time.Millisecond})
				if err != nil {
					t.Fatalf("open queue: %v", err)
				}
				return q
			}
			pub := open(t)
			t.Cleanup(func() { _ = pub.Close() })
			return transporttest.Broker{
				Publisher: pub,
				Open:      func(t testing.TB) transport.Transport { return open(t) },
				Lease:     lease,
			}
		},
	}
}

func sqliteFile(t testing.TB) string { return filepath.Join(t.TempDir(), "queue.db") }

func TestConformanceSQLite(t *testing.T) { transporttest.Run(t, harness(sqliteFile)) }

func TestConformancePostgres(t *testing.T) {
	transporttest.Run(t, harness(func(t testing.TB) string { return pgtest.URL(t) }))
}

// BenchmarkSeqboxThroughput: seqbox end to end over the embedded queue in
// a SQLite file of its own (the store in another), 2,000 events over 50
// keys.
func BenchmarkSeqboxThroughput(b *testing.B) {
	h := harness(sqliteFile)
	for range b.N {
		b.ReportMetric(transporttest.Throughput(b, h.NewBroker(b), 2000, 50), "msgs/s")
	}
}
