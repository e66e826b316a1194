// Package transporttest is the conformance suite every seqbox transport
// runs, in the style of watermill's universal Pub/Sub tests. A transport's
// own test file builds a Harness that opens fresh destinations on a real
// broker (in process or on loopback) and calls Run.
//
// The suite checks the broker side of the contract (delivery, redelivery
// after a consumer dies, nack with delay, lease extension, per-key order,
// closing with deliveries in flight) and, with a seqbox Consumer over a
// real SQLite store, the consumer side: the ACK goes out only after the
// database COMMIT, a handler that runs many leases long is applied once,
// keys run in parallel, and the version gate keeps every key in order even
// over a transport that reorders and redelivers out of order.
//
// Features declares what a broker does not promise; the suite then checks
// the weaker property instead of skipping the test.
package transporttest

import (
	"context"
	"testing"
	"time"

	"github.com/seqbox/seqbox/transport"
)

// Features declares what a broker does not promise. The zero value claims
// everything the suite can check.
type Features struct {
	// NoPerKeyOrder: deliveries of one partition key may arrive in a
	// different order than they were published. The suite then checks
	// only that every message arrives.
	NoPerKeyOrder bool
	// NoNackDelay: Nack's delay is not honoured (the message may come back
	// sooner). The suite then checks only that a nacked message comes back.
	NoNackDelay bool
	// NoAttemptCount: Attempt may report 1 on a redelivery.
	NoAttemptCount bool
	// SharedLease: the transport cannot give a member's unsettled
	// deliveries to another member while the first is alive (Kafka's
	// partition ownership); Extend is then a no-op that must not fail.
	SharedLease bool
}

// Broker is one fresh, empty destination on a broker: a topic, stream or
// queue, with one consumer group every Open joins.
type Broker struct {
	// Publisher publishes structured-mode CloudEvents, routing each by its
	// partitionkey the way the transport's producer helper does.
	Publisher transport.Publisher
	// Open returns a new member of the destination's consumer group. The
	// suite closes every member it opens; Close must not settle the
	// deliveries still in flight, which come back to another member.
	Open func(t testing.TB) transport.Transport
	// Lease is how long a received delivery stays with its member unless
	// it is extended or settled: the visibility timeout, AckWait or ack
	// deadline the harness configured. Keep it short (one to three
	// seconds): the suite waits multiples of it.
	Lease time.Duration
	// Redelivery bounds how long after a member closes without settling
	// its deliveries come back to another member (a rebalance, a session
	// timeout). Zero means Lease.
	Redelivery time.Duration
}

// Harness tells the suite how to reach a transport.
type Harness struct {
	// Features declares what the broker does not promise.
	Features Features
	// NewBroker returns a fresh destination; it is called once per test
	// (and per benchmark run), and its cleanup belongs to t.
	NewBroker func(t testing.TB) Broker
}

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"RoundTrip", testRoundTrip},
		{"RedeliveryAfterDeath", testRedeliveryAfterDeath},
		{"NackWithDelay", testNackWithDelay},
		{"ExtendKeepsLease", testExtendKeepsLease},
		{"PerKeyOrder", testPerKeyOrder},
		{"CloseInFlight", testCloseInFlight},
		{"AckAfterCommit", testAckAfterCommit},
		{"LongHandlerAppliedOnce", testLongHandlerAppliedOnce},
		{"KeysInParallel", testKeysInParallel},
		{"GateOrdersReorderingBroker", testGateOrdersReorderingBroker},
		{"TraceContextTravels", testTraceContextTravels},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// redelivery is how long the suite waits for an unsettled delivery to
// come back after its member went away.
func (b Broker) redelivery() time.Duration {
	if b.Redelivery > 0 {
		return b.Redelivery
	}
	return b.Lease
}

// open opens a member and closes it when the test ends.
func (b Broker) open(t testing.TB) transport.Transport {
	t.Helper()
	tr := b.Open(t)
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// publish publishes every body in order.
func (b Broker) publish(t testing.TB, bodies ...[]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, body := range bodies {
		if err := b.Publisher.Publish(ctx, body); err != nil {
			t.Fatalf("publish %s: %v", body, err)
		}
	}
}
