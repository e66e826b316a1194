package kafka

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
)

// Header names the producer sets on every record. They copy attributes of
// the structured-mode CloudEvent in the value, for routing and inspection
// without parsing it; the value stays the source of truth.
const (
	HeaderID            = "ce-id"
	HeaderSource        = "ce-source"
	HeaderType          = "ce-type"
	HeaderPartitionKey  = "seqbox-partition-key"
	HeaderObjectVersion = "seqbox-object-version"
	HeaderContentType   = "content-type"
)

// contentType is the CloudEvents structured-mode media type.
const contentType = "application/cloudevents+json; charset=UTF-8"

// Publisher produces CloudEvents to a topic: the record key is the
// event's partitionkey (its id when it has none), so Kafka's default
// partitioner keeps every event of a key on one partition, in order.
type Publisher struct {
	cl    *kgo.Client
	topic string
}

var _ transport.Publisher = (*Publisher)(nil)

// NewPublisher returns an idempotent producer (acks from all in-sync
// replicas) for cfg.Topic.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	}
	cl, err := kgo.NewClient(append(opts, cfg.ClientOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: new publisher: %w", err)
	}
	return &Publisher{cl: cl, topic: cfg.Topic}, nil
}

// NewRecord builds the record Publisher produces for body, for callers
// that produce with a client of their own (an outbox relay in a Kafka
// transaction). It refuses an event seqbox would reject, with
// seqboxtype.ParseEvent's error.
func NewRecord(topic string, body []byte) (*kgo.Record, error) {
	ev, err := seqboxtype.ParseEvent(body)
	if err != nil {
		return nil, err
	}
	key := ev.PartitionKey
	if key == "" {
		key = ev.ID
	}
	r := &kgo.Record{Topic: topic, Key: []byte(key), Value: body, Headers: []kgo.RecordHeader{
		{Key: HeaderContentType, Value: []byte(contentType)},
		{Key: HeaderID, Value: []byte(ev.ID)},
		{Key: HeaderSource, Value: []byte(ev.Source)},
		{Key: HeaderType, Value: []byte(ev.Type)},
	}}
	if ev.PartitionKey != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderPartitionKey, Value: []byte(ev.PartitionKey)})
	}
	if v, ok := ev.Version(); ok {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderObjectVersion, Value: strconv.AppendInt(nil, v, 10)})
	}
	if ev.TraceParent != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: transport.HeaderTraceParent, Value: []byte(ev.TraceParent)})
		if ev.TraceState != "" {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: transport.HeaderTraceState, Value: []byte(ev.TraceState)})
		}
	}
	return r, nil
}

// Publish produces one event and waits until the brokers have it. An
// invalid event is refused with seqboxtype.ParseEvent's error and nothing is
// produced.
func (p *Publisher) Publish(ctx context.Context, body []byte) error {
	return p.PublishBatch(ctx, [][]byte{body})
}

// PublishBatch produces events in order and waits until the brokers have
// all of them. Every event is validated first: one invalid event refuses
// the whole batch. Kafka has no atomicity across partitions outside
// transactions: when the produce fails, some events may have been written;
// publishing the batch again is safe, since the inbox absorbs the copies.
func (p *Publisher) PublishBatch(ctx context.Context, bodies [][]byte) error {
	rs := make([]*kgo.Record, len(bodies))
	for i, b := range bodies {
		r, err := NewRecord(p.topic, b)
		if err != nil {
			return err
		}
		rs[i] = r
	}
	if err := p.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("kafka: publish to %s: %w", p.topic, err)
	}
	return nil
}

// Close flushes nothing (every publish waited for its acks) and closes
// the producer.
func (p *Publisher) Close() error {
	p.cl.Close()
	return nil
}
