package pubsub_test

import (
	"path"
	"testing"
	"time"

	broker "github.com/seqbox/seqbox/internal/broker/pubsub"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/pubsub"
	"github.com/seqbox/seqbox/transport/transporttest"
)

// lease is the subscriptions' ack deadline in the tests (pstest accepts
// less than Pub/Sub's 10 s minimum).
const lease = 2 * time.Second

// unorderedTests are the suite's tests that get a subscription without
// message ordering. On an ordered subscription pstest leases only the
// oldest unacknowledged message of each ordering key, and nothing more of
// that key until it is acknowledged (Pub/Sub itself may lease several, in
// order). These tests receive several messages of one key before
// acknowledging any, which that never allows, and none of them checks
// order: GateOrdersReorderingBroker needs a broker that reorders, and the
// other three compare sorted bodies.
var unorderedTests = map[string]bool{
	"RoundTrip": true, "RedeliveryAfterDeath": true, "CloseInFlight": true, "GateOrdersReorderingBroker": true,
}

// TestConformance runs the transport suite on the configuration seqbox
// recommends: subscriptions with a dead-letter policy (so Pub/Sub counts
// the attempts) and message ordering, except for the tests above. The
// others, PerKeyOrder included, run on ordered subscriptions, so no
// feature is declared missing.
func TestConformance(t *testing.T) { transporttest.Run(t, harness(startBroker(t))) }

// harness gives each test fresh topics and subscriptions on srv.
func harness(srv *broker.Server) transporttest.Harness {
	return transporttest.Harness{
		NewBroker: func(t testing.TB) transporttest.Broker {
			cfg := fresh(t, srv, func(c *pubsub.Config) { c.Unordered = unorderedTests[path.Base(t.Name())] })
			return transporttest.Broker{
				Publisher: publisher(t, cfg),
				Open:      func(t testing.TB) transport.Transport { return openRaw(t, cfg) },
				Lease:     lease,
			}
		},
	}
}

// openRaw opens a member the suite closes itself.
func openRaw(t testing.TB, cfg pubsub.Config) transport.Transport {
	t.Helper()
	tr, err := pubsub.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return tr
}

// BenchmarkSeqboxThroughput: seqbox end to end over Pub/Sub (pstest, an ordered subscription), 2,000 events over
// 50 keys, into a SQLite store.
func BenchmarkSeqboxThroughput(b *testing.B) {
	h := harness(startBroker(b))
	for range b.N {
		b.ReportMetric(transporttest.Throughput(b, h.NewBroker(b), 2000, 50), "msgs/s")
	}
}
