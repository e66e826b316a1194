package nats_test

import (
	"testing"
	"time"

	broker "github.com/seqbox/seqbox/internal/broker/nats"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// TestConformance runs the transport suite on a fresh stream of a single
// in-process JetStream server per test, with a 2s AckWait as the lease.
// Every feature is claimed: per-key order (one member sees each partition
// subject in stream order), nack delay (NakWithDelay), attempt counts
// (NumDelivered) and leases another member can take over (AckWait).
func TestConformance(t *testing.T) { transporttest.Run(t, harness()) }

// harness gives each test a fresh stream on a server of its own.
func harness() transporttest.Harness {
	const lease = 2 * time.Second
	return transporttest.Harness{
		NewBroker: func(t testing.TB) transporttest.Broker {
			cfg := freshConfig(startServer(t).URL(), lease)
			return transporttest.Broker{
				Publisher: publisherT(t, cfg),
				Open:      func(t testing.TB) transport.Transport { return openT(t, cfg) },
				Lease:     lease,
			}
		},
	}
}

// BenchmarkSeqboxThroughput: seqbox end to end over NATS JetStream (one in-process server), 2,000 events over
// 50 keys, into a SQLite store.
func BenchmarkSeqboxThroughput(b *testing.B) {
	h := harness()
	for range b.N {
		b.ReportMetric(transporttest.Throughput(b, h.NewBroker(b), 2000, 50), "msgs/s")
	}
}

// TestConformanceCluster runs the suite on a 3-node JetStream cluster,
// each test on a fresh stream replicated on all three nodes.
func TestConformanceCluster(t *testing.T) {
	const lease = 2 * time.Second
	c, err := broker.StartCluster(3, t.TempDir())
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.WaitReady(30 * time.Second); err != nil {
		t.Fatalf("cluster not ready: %v", err)
	}
	transporttest.Run(t, transporttest.Harness{
		NewBroker: func(t testing.TB) transporttest.Broker {
			cfg := freshConfig(c.URL(), lease)
			cfg.Replicas = 3
			return transporttest.Broker{
				Publisher: publisherT(t, cfg),
				Open:      func(t testing.TB) transport.Transport { return openT(t, cfg) },
				Lease:     lease,
			}
		},
	})
}
