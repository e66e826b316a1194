package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seqbox/seqbox/transport"
)

// Transport is one member of a durable pull consumer: it fetches batches
// from the stream and hands them out as deliveries. Members of one Durable
// share its messages; each has a connection of its own.
type Transport struct {
	cfg  Config
	nc   *natsgo.Conn
	cons jetstream.Consumer

	mu     sync.Mutex
	closed bool
}

var (
	_ transport.Transport  = (*Transport)(nil)
	_ transport.BatchAcker = (*Transport)(nil)
)

// Open connects to cfg.URL, makes sure the stream exists and creates or
// updates the durable consumer cfg describes.
func Open(ctx context.Context, cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	nc, js, err := connect(cfg)
	if err != nil {
		return nil, err
	}
	s, err := ensureStream(ctx, js, cfg)
	if err == nil {
		var cons jetstream.Consumer
		if cons, err = s.CreateOrUpdateConsumer(ctx, consumerConfig(cfg)); err == nil {
			return &Transport{cfg: cfg, nc: nc, cons: cons}, nil
		}
		err = fmt.Errorf("nats transport: consumer %s: %w", cfg.Durable, err)
	}
	nc.Close()
	return nil, err
}

// Receive returns up to n deliveries in stream order: what is ready at
// once, or else the first message within Config.Wait and what is ready
// behind it.
func (t *Transport) Receive(ctx context.Context, n int) ([]transport.Delivery, error) {
	if t.isClosed() {
		return nil, transport.ErrClosed
	}
	n = min(max(n, 1), t.cfg.MaxAckPending)
	ds, err := t.fetch(t.cons.FetchNoWait(n))
	if err != nil || len(ds) > 0 {
		return ds, err
	}
	wait := t.cfg.Wait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	if wait < 10*time.Millisecond {
		return nil, ctx.Err()
	}
	if ds, err = t.fetch(t.cons.Fetch(1, jetstream.FetchMaxWait(wait))); err != nil || len(ds) == 0 || n == 1 {
		return ds, err
	}
	more, err := t.fetch(t.cons.FetchNoWait(n - 1))
	if err != nil {
		// What arrived is delivered; the error shows on the next call.
		return ds, nil
	}
	return append(ds, more...), nil
}

// fetch turns one pull request's messages into deliveries. An error
// after some messages arrived is dropped: the deliveries must reach the
// caller, and the next request meets the error again.
func (t *Transport) fetch(batch jetstream.MessageBatch, err error) ([]transport.Delivery, error) {
	if errors.Is(err, natsgo.ErrNoResponders) {
		// The consumer's leader is moving (a cluster electing one): nothing
		// was received, and the next request finds the new leader.
		return nil, nil
	}
	if err != nil {
		return nil, t.fail("receive", err)
	}
	var ds []transport.Delivery
	for m := range batch.Messages() {
		attempt := 1
		if md, err := m.Metadata(); err == nil {
			attempt = int(md.NumDelivered)
		}
		ds = append(ds, &delivery{t: t, msg: m, attempt: attempt})
	}
	if err := batch.Error(); err != nil && len(ds) == 0 {
		if errors.Is(err, natsgo.ErrNoResponders) {
			return nil, nil
		}
		return nil, t.fail("receive", err)
	}
	return ds, nil
}

// fail wraps a client error; after Close every error is ErrClosed.
func (t *Transport) fail(what string, err error) error {
	if t.isClosed() {
		return fmt.Errorf("nats transport: %s: %w", what, transport.ErrClosed)
	}
	return fmt.Errorf("nats transport: %s: %w", what, err)
}

// AckBatch acknowledges every delivery and waits for the server to confirm
// each (acknowledgements go out together, not one round trip after
// another). JetStream settles an acknowledged message even when its
// AckWait ran out meanwhile, so no delivery is reported ErrLeaseLost.
func (t *Transport) AckBatch(ctx context.Context, ds []transport.Delivery) error {
	for _, td := range ds {
		if d, ok := td.(*delivery); !ok || d.t != t {
			return errors.New("nats transport: ack batch got a delivery from another transport")
		}
	}
	const inFlight = 64
	sem := make(chan struct{}, inFlight)
	errs := make([]error, len(ds))
	var wg sync.WaitGroup
	for i, td := range ds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = td.Ack(ctx)
		})
	}
	wg.Wait()
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("nats transport: %d of %d acks failed: %w", len(failed), len(ds), errors.Join(failed...))
	}
	return nil
}

// Close closes the member's connection. Deliveries in flight are not
// settled: JetStream delivers them again, to another member, once their
// AckWait runs out.
func (t *Transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	t.nc.Close()
	return nil
}

func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}
