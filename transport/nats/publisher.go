package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
)

// Header names a published message carries. The body is the structured-mode
// CloudEvent unchanged; the headers repeat what routing and tooling need.
const (
	// HeaderMsgID is JetStream's deduplication header; its value is the
	// event's identity (see MsgID).
	HeaderMsgID = jetstream.MsgIDHeader
	// HeaderID is the CloudEvent id.
	HeaderID = "ce-id"
	// HeaderSource is the CloudEvent source.
	HeaderSource = "ce-source"
	// HeaderType is the CloudEvent type.
	HeaderType = "ce-type"
	// HeaderPartitionKey is the event's partitionkey (absent when empty).
	HeaderPartitionKey = "seqbox-partition-key"
	// HeaderObjectVersion is the event's objectversion (absent when none).
	HeaderObjectVersion = "seqbox-object-version"
)

// Publisher publishes CloudEvents to the stream, each on its partition
// subject, with the identity as Nats-Msg-Id.
type Publisher struct {
	cfg Config
	nc  *natsgo.Conn
	js  jetstream.JetStream
}

var _ transport.Publisher = (*Publisher)(nil)

// NewPublisher connects to cfg.URL and makes sure the stream exists.
func NewPublisher(ctx context.Context, cfg Config) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	nc, js, err := connect(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := ensureStream(ctx, js, cfg); err != nil {
		nc.Close()
		return nil, err
	}
	return &Publisher{cfg: cfg, nc: nc, js: js}, nil
}

// MsgID is the Nats-Msg-Id of an event: its identity, source and id, and
// its payload hash (seqboxtype.Event.Hash), as the JSON array
// ["<source>","<id>","<hash>"]. It is unambiguous (a source that ends
// like an id cannot collide) and has no raw line breaks. The stream drops
// a retried publication of the same event; the same id with a different
// payload is a collision, not a retry, and is stored, so the consumer's
// inbox sees it and parks it instead of the broker hiding it.
func MsgID(source, id, hash string) string {
	b, _ := json.Marshal([3]string{source, id, hash})
	return string(b)
}

// Message builds the NATS message Publish sends for body: the body
// unchanged, on its partition subject (partitionkey, or the id when the
// event has none), with the headers above. An invalid event is refused
// with seqboxtype.ParseEvent's error.
func (p *Publisher) Message(body []byte) (*natsgo.Msg, error) {
	ev, err := seqboxtype.ParseEvent(body)
	if err != nil {
		return nil, err
	}
	key := ev.PartitionKey
	if key == "" {
		key = ev.ID
	}
	m := natsgo.NewMsg(Subject(p.cfg.Subject, key, p.cfg.Partitions))
	m.Data = body
	m.Header.Set(HeaderMsgID, MsgID(ev.Source, ev.ID, ev.Hash))
	m.Header.Set(HeaderID, headerValue(ev.ID))
	m.Header.Set(HeaderSource, headerValue(ev.Source))
	m.Header.Set(HeaderType, headerValue(ev.Type))
	if ev.PartitionKey != "" {
		m.Header.Set(HeaderPartitionKey, headerValue(ev.PartitionKey))
	}
	if v, ok := ev.Version(); ok {
		m.Header.Set(HeaderObjectVersion, strconv.FormatInt(v, 10))
	}
	if ev.TraceParent != "" {
		m.Header.Set(transport.HeaderTraceParent, headerValue(ev.TraceParent))
		if ev.TraceState != "" {
			m.Header.Set(transport.HeaderTraceState, headerValue(ev.TraceState))
		}
	}
	return m, nil
}

// Publish stores one event and waits for the stream's acknowledgement. A
// publication the stream drops as a duplicate (same identity within
// DuplicateWindow) succeeds: the event is stored once. Retrying a failed
// Publish is safe for the same reason.
func (p *Publisher) Publish(ctx context.Context, body []byte) error {
	m, err := p.Message(body)
	if err != nil {
		return err
	}
	if _, err := p.js.PublishMsg(ctx, m, jetstream.WithExpectStream(p.cfg.Stream)); err != nil {
		return fmt.Errorf("nats publish %s: %w", m.Header.Get(HeaderMsgID), err)
	}
	return nil
}

// PublishBatch stores events in order, publishing asynchronously in
// windows of batchWindow messages. Every body is checked first: an invalid
// event refuses the whole batch and nothing is published. The batch is not
// atomic; when an error is returned some events may be stored, and
// retrying the batch stores each of them once.
func (p *Publisher) PublishBatch(ctx context.Context, bodies [][]byte) error {
	msgs := make([]*natsgo.Msg, len(bodies))
	for i, b := range bodies {
		m, err := p.Message(b)
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		msgs[i] = m
	}
	for len(msgs) > 0 {
		n := min(len(msgs), batchWindow)
		if err := p.publishWindow(ctx, msgs[:n]); err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}

// batchWindow bounds the publications PublishBatch has in flight, well
// below the client's limit on unacknowledged asynchronous publications.
const batchWindow = 256

// publishWindow publishes msgs asynchronously and waits for every
// acknowledgement.
func (p *Publisher) publishWindow(ctx context.Context, msgs []*natsgo.Msg) error {
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	var errs []error
	for _, m := range msgs {
		f, err := p.js.PublishMsgAsync(m, jetstream.WithExpectStream(p.cfg.Stream))
		if err != nil {
			errs = append(errs, fmt.Errorf("nats publish %s: %w", m.Header.Get(HeaderMsgID), err))
			break
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			if inProcess(err) {
				continue // its twin earlier in the window is being stored: reported there
			}
			errs = append(errs, fmt.Errorf("nats publish %s: %w", f.Msg().Header.Get(HeaderMsgID), err))
		case <-ctx.Done():
			return errors.Join(append(errs, ctx.Err())...)
		}
	}
	return errors.Join(errs...)
}

// inProcess reports the stream's answer to a publication whose
// Nats-Msg-Id an earlier one, not yet stored, carries (JetStream error
// 10158): a duplicate of a publication in the same batch.
func inProcess(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == 10158
}

// Close closes the publisher's connection.
func (p *Publisher) Close() error {
	p.nc.Close()
	return nil
}

// headerValue percent-encodes what a header value cannot carry (control
// characters, which would end the header) and '%' itself, as the
// CloudEvents HTTP binding does.
func headerValue(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '%' }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
