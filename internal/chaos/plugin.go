package chaos

import (
	"context"
	"time"

	"github.com/seqbox/seqbox/transport"
)

// Queue is one scenario's stream, topic or queue on a broker that a
// package outside the harness provides (seqbox-lab's Pub/Sub): the
// harness publishes the workload through it, counts what is not yet
// acknowledged, and hands its Args to the workers.
type Queue interface {
	// PublishBatch publishes bodies in order.
	PublishBatch(ctx context.Context, bodies [][]byte) error
	// Pending counts the messages not yet acknowledged: waiting or in
	// flight.
	Pending(ctx context.Context) (int, error)
	// Args are the worker flags that reach the queue.
	Args() []string
	// Close releases the publisher.
	Close() error
}

// BrokerOf is the Broker whose scenarios each get the Queue open
// returns; closing it calls close (nil: nothing to release).
func BrokerOf(open func(ctx context.Context, lease time.Duration) (Queue, error), close func() error) Broker {
	return funcBroker{openQueue: open, close: close}
}

type funcBroker struct {
	openQueue func(ctx context.Context, lease time.Duration) (Queue, error)
	close     func() error
}

func (b funcBroker) open(ctx context.Context, lease time.Duration) (queue, error) {
	return b.openQueue(ctx, lease)
}

func (b funcBroker) Close() error {
	if b.close == nil {
		return nil
	}
	return b.close()
}

// PublishRuns publishes bodies in order: runs of valid events through
// batch (the transport's publisher), and invalid ones, which a producer
// helper refuses, one by one through raw, as a foreign producer would.
func PublishRuns(ctx context.Context, bodies [][]byte, batch func(context.Context, [][]byte) error,
	raw func(context.Context, []byte) error) error {
	return publishRuns(ctx, bodies, batch, raw)
}

// WorkerTransport opens the transport a chaos worker consumes from, for a
// transport the harness does not link itself.
type WorkerTransport func(ctx context.Context, opt WorkerOptions) (transport.Transport, error)
