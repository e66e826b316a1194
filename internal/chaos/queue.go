package chaos

import (
	"context"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport/embedded"
)

// queue is where one scenario's messages wait: the embedded queue in the
// scenario's database, or a stream, topic or queue of its own on the
// run's Broker.
type queue interface {
	PublishBatch(ctx context.Context, bodies [][]byte) error
	// Pending counts the messages not yet acknowledged: waiting or in
	// flight.
	Pending(ctx context.Context) (int, error)
	// Args are the worker flags that reach the queue.
	Args() []string
	Close() error
}

// describer is a queue that can say why messages stay pending, for the
// post-mortem of a phase that stalls.
type describer interface {
	Describe(ctx context.Context) string
}

type embeddedQueue struct{ *embedded.Queue }

func (q embeddedQueue) Pending(ctx context.Context) (int, error) {
	ready, leased, err := q.Depth(ctx)
	return ready + leased, err
}

func (embeddedQueue) Args() []string { return nil }

// publishRuns publishes bodies in order: runs of valid events through the
// transport's publisher, and the workload's invalid ones (which a
// producer helper refuses) raw, as a foreign producer would.
func publishRuns(ctx context.Context, bodies [][]byte, batch func(context.Context, [][]byte) error,
	raw func(context.Context, []byte) error) error {
	var run [][]byte
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		err := batch(ctx, run)
		run = run[:0]
		return err
	}
	for _, b := range bodies {
		if _, err := seqboxtype.ParseEvent(b); err == nil {
			run = append(run, b)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if err := raw(ctx, b); err != nil {
			return err
		}
	}
	return flush()
}
