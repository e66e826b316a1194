package nats_test

import (
	"testing"
	"time"

	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// TestConformance runs the transport suite on a fresh stream of a single
// in-process JetStream server per test, with a 2s AckWait as the lease.
// Every feature is claimed: per-key order (one member sees each partition
// subject in stream order), nack delay (NakWithDelay), attempt counts
// (NumDelivered) and leases another member can take over (AckWait).
func TestConformance(t *testing.T) {
	const lease = 2 * time.Second
	transporttest.Run(t, transporttest.Harness{
		NewBroker: func(t *testing.T) transporttest.Broker {
			cfg := freshConfig(startServer(t).URL(), lease)
			return transporttest.Broker{
				Publisher: publisherT(t, cfg),
				Open:      func(t testing.TB) transport.Transport { return openT(t, cfg) },
				Lease:     lease,
			}
		},
	})
}
