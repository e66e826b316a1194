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
func TestConformance(t *testing.T) {
	const lease = 2 * time.Second
	transporttest.Run(t, transporttest.Harness{
		Features: transporttest.Features{NoPerKeyOrder: true, NoAttemptCount: true},
		NewBroker: func(t *testing.T) transporttest.Broker {
			e := newEnv(t, lease, broker.Queue{})
			return transporttest.Broker{
				Publisher: e.pub,
				Open:      func(t testing.TB) transport.Transport { return e.open(t) },
				Lease:     lease,
			}
		},
	})
}
