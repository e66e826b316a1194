package serve

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/seqbox/seqbox/transport"
)

// sequencer wraps the transport so that the agent is called in order per
// key. seqbox runs a batch's Decide calls (where the agent call happens,
// outside the inbox transaction) concurrently; the sequencer makes the
// call of a delivery wait until every delivery of its key received before
// it has been settled (acked or nacked, after its commit), so that the
// agent sees a key's events one at a time, in queue order, each after its
// predecessor's gate decision committed.
type sequencer struct {
	inner transport.Transport
	mu    sync.Mutex
	keys  map[string][]*turn
}

// turn is one keyed delivery in flight.
type turn struct {
	source, id string
	claimed    bool
	done       chan struct{}
	once       sync.Once
}

func newSequencer(inner transport.Transport) *sequencer {
	return &sequencer{inner: inner, keys: map[string][]*turn{}}
}

// Receive receives from the inner transport and registers each keyed
// delivery's turn.
func (s *sequencer) Receive(ctx context.Context, max int) ([]transport.Delivery, error) {
	ds, err := s.inner.Receive(ctx, max)
	if err != nil {
		return nil, err
	}
	out := make([]transport.Delivery, len(ds))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range ds {
		var head struct {
			Source       string `json:"source"`
			ID           string `json:"id"`
			PartitionKey string `json:"partitionkey"`
		}
		if json.Unmarshal(d.Body(), &head) != nil || head.PartitionKey == "" {
			out[i] = d
			continue
		}
		t := &turn{source: head.Source, id: head.ID, done: make(chan struct{})}
		s.keys[head.PartitionKey] = append(s.keys[head.PartitionKey], t)
		out[i] = &sequenced{Delivery: d, s: s, key: head.PartitionKey, t: t}
	}
	return out, nil
}

// Close closes the inner transport.
func (s *sequencer) Close() error { return s.inner.Close() }

// AckBatch settles many deliveries in one round trip when the inner
// transport can.
func (s *sequencer) AckBatch(ctx context.Context, ds []transport.Delivery) error {
	b, ok := s.inner.(transport.BatchAcker)
	if !ok {
		var first error
		for _, d := range ds {
			if err := d.Ack(ctx); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	inner := make([]transport.Delivery, len(ds))
	for i, d := range ds {
		inner[i] = d
		if sd, ok := d.(*sequenced); ok {
			inner[i] = sd.Delivery
		}
	}
	err := b.AckBatch(ctx, inner)
	for _, d := range ds {
		if sd, ok := d.(*sequenced); ok {
			s.finish(sd.key, sd.t)
		}
	}
	return err
}

// finish ends a turn: the deliveries behind it may call the agent.
func (s *sequencer) finish(key string, t *turn) {
	t.once.Do(func() {
		close(t.done)
		s.mu.Lock()
		defer s.mu.Unlock()
		list := s.keys[key]
		for i, x := range list {
			if x == t {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(s.keys, key)
		} else {
			s.keys[key] = list
		}
	})
}

// waitTurn blocks until every delivery of key received before the one of
// (source, id) is settled. A message not received through the sequencer
// (a redrive) waits for nothing.
func (s *sequencer) waitTurn(ctx context.Context, key, source, id string) error {
	s.mu.Lock()
	var before []chan struct{}
	for _, t := range s.keys[key] {
		if t.source == source && t.id == id && !t.claimed {
			t.claimed = true
			break
		}
		before = append(before, t.done)
	}
	if len(before) == len(s.keys[key]) {
		before = nil // not found: nothing to wait for
	}
	s.mu.Unlock()
	for _, ch := range before {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// sequenced is a delivery whose settlement ends its turn.
type sequenced struct {
	transport.Delivery
	s   *sequencer
	key string
	t   *turn
}

// Ack acknowledges and ends the turn.
func (d *sequenced) Ack(ctx context.Context) error {
	defer d.s.finish(d.key, d.t)
	return d.Delivery.Ack(ctx)
}

// Nack returns the message and ends the turn.
func (d *sequenced) Nack(ctx context.Context, delay time.Duration) error {
	defer d.s.finish(d.key, d.t)
	return d.Delivery.Nack(ctx, delay)
}
