package kafka_test

import (
	"testing"
	"time"

	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// TestConformance runs the transport suite against an in-process cluster,
// a fresh one per test, on a topic of four partitions.
func TestConformance(t *testing.T) { transporttest.Run(t, harness()) }

// harness gives each test a fresh in-process cluster.
func harness() transporttest.Harness {
	return transporttest.Harness{
		// A partition is owned until a rebalance: no member can take a
		// live member's deliveries, and Extend has nothing to extend.
		Features: transporttest.Features{SharedLease: true},
		NewBroker: func(t testing.TB) transporttest.Broker {
			r := newRig(t, 4)
			return transporttest.Broker{
				Publisher: r.publisher(t),
				Open:      func(t testing.TB) transport.Transport { return r.open(t, "conformance") },
				// The suite's lease stands for how long a delivery stays
				// with its member; a Kafka member keeps it until a
				// rebalance. A closed member leaves the group at once,
				// so its records come back after one rebalance.
				Lease:      1500 * time.Millisecond,
				Redelivery: 5 * time.Second,
			}
		},
	}
}

// BenchmarkSeqboxThroughput: seqbox end to end over Kafka (kfake, four partitions), 2,000 events over
// 50 keys, into a SQLite store.
func BenchmarkSeqboxThroughput(b *testing.B) {
	h := harness()
	for range b.N {
		b.ReportMetric(transporttest.Throughput(b, h.NewBroker(b), 2000, 50), "msgs/s")
	}
}
