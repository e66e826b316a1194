package sqs_test

import (
	"testing"
	"time"

	broker "github.com/seqbox/seqbox/internal/broker/sqs"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// TestConformance runs the transport suite against goaws. goaws neither
// holds a FIFO group while one of its messages is in flight nor counts
// receives (see the package doc and internal/broker/sqs's probes), so
// the harness declares NoPerKeyOrder and NoAttemptCount; real SQS FIFO
// keeps both promises.
func TestConformance(t *testing.T) { transporttest.Run(t, harness()) }

// harness gives each test a fresh FIFO queue on goaws.
func harness() transporttest.Harness {
	const lease = 2 * time.Second
	return transporttest.Harness{
		Features: transporttest.Features{NoPerKeyOrder: true, NoAttemptCount: true},
		NewBroker: func(t testing.TB) transporttest.Broker {
			e := newEnv(t, lease, broker.Queue{})
			return transporttest.Broker{
				Publisher: e.pub,
				Open:      func(t testing.TB) transport.Transport { return e.open(t) },
				Lease:     lease,
			}
		},
	}
}

// BenchmarkSeqboxThroughput: seqbox end to end over SQS FIFO (goaws), 2,000 events over
// 50 keys, into a SQLite store.
func BenchmarkSeqboxThroughput(b *testing.B) {
	h := harness()
	for range b.N {
		b.ReportMetric(transporttest.Throughput(b, h.NewBroker(b), 2000, 50), "msgs/s")
	}
}
