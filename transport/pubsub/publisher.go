package pubsub

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	ps "cloud.google.com/go/pubsub/v2"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
)

// Attributes every published message carries, so that subscribers,
// filters and dead-letter tooling can read the identity without parsing
// the body.
const (
	AttrID            = "ce-id"
	AttrSource        = "ce-source"
	AttrType          = "ce-type"
	AttrSpecVersion   = "ce-specversion"
	AttrPartitionKey  = "seqbox-partition-key"
	AttrObjectVersion = "seqbox-object-version"
)

var _ transport.Publisher = (*Publisher)(nil)

// Publisher publishes structured-mode CloudEvents to a topic, unchanged,
// with the event's partitionkey as the ordering key.
type Publisher struct {
	c *ps.Client
	p *ps.Publisher
}

// NewPublisher returns a publisher on cfg.Topic, with message ordering
// enabled.
func NewPublisher(ctx context.Context, cfg Config) (*Publisher, error) {
	cfg, err := cfg.withDefaults("Topic")
	if err != nil {
		return nil, err
	}
	c, err := ps.NewClient(ctx, cfg.Project, cfg.clientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("pubsub: new publisher: %w", err)
	}
	p := c.Publisher(topicName(cfg.Project, cfg.Topic))
	p.EnableMessageOrdering = true
	return &Publisher{c: c, p: p}, nil
}

// Publish publishes one event and waits until Pub/Sub has it.
func (p *Publisher) Publish(ctx context.Context, body []byte) error {
	return p.PublishBatch(ctx, [][]byte{body})
}

// PublishBatch publishes events in order and waits until Pub/Sub has each.
// An invalid event (seqboxtype.ParseEvent's error) fails the whole batch
// before anything is published. Pub/Sub has no publish-side dedupe: a
// retried publish may store a message twice, which seqbox's inbox
// recognises by (source, id).
//
// When a message of an ordering key fails, the client pauses that key so
// that nothing later overtakes it; PublishBatch resumes the key and
// returns the error, and the caller must publish the failed event again
// before the key's next ones to keep their order (seqbox's version gate
// holds the successors meanwhile if it does not).
func (p *Publisher) PublishBatch(ctx context.Context, bodies [][]byte) error {
	msgs := make([]*ps.Message, len(bodies))
	for i, body := range bodies {
		ev, err := seqboxtype.ParseEvent(body)
		if err != nil {
			return fmt.Errorf("pubsub: publish: event %d: %w", i, err)
		}
		msgs[i] = message(ev, body)
	}
	results := make([]*ps.PublishResult, len(msgs))
	for i, m := range msgs {
		results[i] = p.p.Publish(ctx, m)
	}
	var errs []error
	for i, r := range results {
		if _, err := r.Get(ctx); err != nil {
			p.p.ResumePublish(msgs[i].OrderingKey)
			errs = append(errs, fmt.Errorf("pubsub: publish %s (ordering key %q): %w", msgs[i].Attributes[AttrID], msgs[i].OrderingKey, err))
		}
	}
	return errors.Join(errs...)
}

// message is ev's Pub/Sub message: the body unchanged, the ordering key
// and the identity attributes. An event without a partitionkey has no
// ordering key: Pub/Sub delivers it without order, as seqbox expects.
func message(ev seqboxtype.Event, body []byte) *ps.Message {
	attrs := map[string]string{AttrID: ev.ID, AttrSource: ev.Source, AttrType: ev.Type}
	if ev.SpecVersion != "" {
		attrs[AttrSpecVersion] = ev.SpecVersion
	}
	if ev.PartitionKey != "" {
		attrs[AttrPartitionKey] = ev.PartitionKey
	}
	if v, ok := ev.Version(); ok {
		attrs[AttrObjectVersion] = strconv.FormatInt(v, 10)
	}
	if ev.TraceParent != "" {
		attrs[transport.HeaderTraceParent] = ev.TraceParent
		if ev.TraceState != "" {
			attrs[transport.HeaderTraceState] = ev.TraceState
		}
	}
	return &ps.Message{Data: body, Attributes: attrs, OrderingKey: ev.PartitionKey}
}

// Close sends what is still buffered, then closes the client.
func (p *Publisher) Close() error {
	p.p.Stop()
	return p.c.Close()
}
