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

// conformance runs the transport suite on queues in the database where
// names (a fresh one per test).
func conformance(t *testing.T, where func(t *testing.T) string) {
	const lease = 1500 * time.Millisecond
	transporttest.Run(t, transporttest.Harness{
		NewBroker: func(t *testing.T) transporttest.Broker {
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
	})
}

func TestConformanceSQLite(t *testing.T) {
	conformance(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "queue.db") })
}

func TestConformancePostgres(t *testing.T) {
	conformance(t, func(t *testing.T) string { return pgtest.URL(t) })
}
