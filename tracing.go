package seqbox

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
)

// Tracing follows OpenTelemetry's messaging conventions (docs/design.md
// §22): a receive span per batch the transport hands out, a process span
// per message from its first stage to the COMMIT that records its
// outcome, and a settle span per acknowledgement after it. The producer's
// context comes from the CloudEvents distributed-tracing extension
// (traceparent), or from the broker's headers when the envelope has none.

// errNoResult ends a process span whose message reached no result in a
// transaction that committed.
var errNoResult = errors.New("no outcome was recorded for it")

// instrumentationName names seqbox's tracer.
const instrumentationName = "github.com/seqbox/seqbox"

// messagingSystem is messaging.system on seqbox's spans.
const messagingSystem = "seqbox"

// Span attribute keys of seqbox's own (the rest are the conventions').
const (
	attrSource        = attribute.Key("seqbox.source")
	attrPartitionKey  = attribute.Key("seqbox.partitionkey")
	attrObjectVersion = attribute.Key("seqbox.objectversion")
	attrAttempt       = attribute.Key("seqbox.attempt")
	attrOutcome       = attribute.Key("seqbox.outcome")
	attrReason        = attribute.Key("seqbox.reason")
)

// traceContext is the W3C trace-context propagator: seqbox reads and
// writes only traceparent and tracestate, whatever the global propagator.
var traceContext propagation.TraceContext

// tracing starts seqbox's spans for one consumer.
type tracing struct {
	t        trace.Tracer
	consumer string
}

func newTracing(tp trace.TracerProvider, consumer string) tracing {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tracing{t: tp.Tracer(instrumentationName), consumer: consumer}
}

// producerContext parses a W3C traceparent (and tracestate); the result
// is invalid when traceparent is absent or malformed.
func producerContext(traceparent, tracestate string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
	return trace.SpanContextFromContext(ctx)
}

// start starts a span about a message whose producer context is producer:
// a child of ctx's span when ctx has one (a caller's own trace), of the
// producer's otherwise, linked to the producer's either way.
func (t tracing) start(ctx context.Context, name string, kind trace.SpanKind, producer trace.SpanContext) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind)}
	if producer.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: producer}))
		if !trace.SpanContextFromContext(ctx).IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, producer)
		}
	}
	return t.t.Start(ctx, name, opts...)
}

// startProcess starts in's process span. It parses in's envelope (once:
// the pipeline reuses the parse) to find the producer's context.
func (t tracing) startProcess(ctx context.Context, in *input, volatile []string) (context.Context, trace.Span) {
	ev, perr := in.event(volatile)
	in.parsed, in.ev, in.perr = true, ev, perr
	tp, ts := ev.TraceParent, ev.TraceState
	if tp == "" {
		tp, ts = in.traceParent, in.traceState
	}
	ctx, span := t.start(ctx, "process "+t.consumer, trace.SpanKindConsumer, producerContext(tp, ts))
	if span.IsRecording() {
		span.SetAttributes(t.messageAttributes(semconv.MessagingOperationTypeProcess, "process", ev)...)
		span.SetAttributes(attrAttempt.Int(in.attempt))
	}
	return ctx, span
}

// startDecide starts the span of an agent's decision about ev: the
// context the agent's request carries, in the producer's trace.
func (t tracing) startDecide(ctx context.Context, ev seqboxtype.Event) (context.Context, trace.Span) {
	ctx, span := t.start(ctx, "decide "+t.consumer, trace.SpanKindInternal, producerContext(ev.TraceParent, ev.TraceState))
	if span.IsRecording() {
		span.SetAttributes(t.messageAttributes(semconv.MessagingOperationTypeProcess, "decide", ev)...)
	}
	return ctx, span
}

// messageAttributes are the attributes every span about ev carries.
func (t tracing) messageAttributes(op attribute.KeyValue, name string, ev seqboxtype.Event) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(messagingSystem), op, semconv.MessagingOperationName(name),
		semconv.MessagingConsumerGroupName(t.consumer),
	}
	if ev.ID != "" {
		attrs = append(attrs, semconv.MessagingMessageID(ev.ID), attrSource.String(ev.Source))
	}
	if ev.PartitionKey != "" {
		attrs = append(attrs, attrPartitionKey.String(ev.PartitionKey))
	}
	if v, ok := ev.Version(); ok {
		attrs = append(attrs, attrObjectVersion.Int64(v))
	}
	return attrs
}

// receive records a batch the transport handed out between start and
// now, linked to each message's producer. The envelopes are read for
// their trace context only when the span records.
func (t tracing) receive(ctx context.Context, start time.Time, ds []transport.Delivery) {
	_, span := t.t.Start(ctx, "receive "+t.consumer, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(start))
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingSystemKey.String(messagingSystem), semconv.MessagingOperationTypeReceive,
			semconv.MessagingOperationName("receive"), semconv.MessagingConsumerGroupName(t.consumer),
			semconv.MessagingBatchMessageCount(len(ds)))
		for _, d := range ds {
			if p := deliveryProducer(d); p.IsValid() {
				span.AddLink(trace.Link{SpanContext: p})
			}
		}
	}
	span.End()
}

// deliveryProducer is a delivery's producer context: the envelope's
// traceparent, or else the broker's headers.
func deliveryProducer(d transport.Delivery) trace.SpanContext {
	var k struct {
		TraceParent any `json:"traceparent"`
		TraceState  any `json:"tracestate"`
	}
	_ = json.Unmarshal(d.Body(), &k) // an undecodable body has no context
	tp, _ := k.TraceParent.(string)
	ts, _ := k.TraceState.(string)
	if tp == "" {
		tp, ts = brokerTrace(d)
	}
	return producerContext(tp, ts)
}

// brokerTrace is the trace context in a delivery's broker headers, if it
// has any.
func brokerTrace(d transport.Delivery) (traceparent, tracestate string) {
	if h, ok := d.(transport.HeaderCarrier); ok {
		return h.Header(transport.HeaderTraceParent), h.Header(transport.HeaderTraceState)
	}
	return "", ""
}

// settle records an acknowledgement (op "ack" or "nack") of the message
// whose process span is process, made between start and end.
func (t tracing) settle(process trace.SpanContext, op string, start, end time.Time, err error) {
	if !process.IsValid() {
		return
	}
	ctx := trace.ContextWithSpanContext(context.Background(), process)
	_, span := t.t.Start(ctx, op+" "+t.consumer, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start))
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingSystemKey.String(messagingSystem), semconv.MessagingOperationTypeSettle,
			semconv.MessagingOperationName(op), semconv.MessagingConsumerGroupName(t.consumer))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End(trace.WithTimestamp(end))
}

// endSpan ends span, marked as failed when err is set.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// openSpan is a process span that ends once its transaction does.
type openSpan struct {
	span trace.Span
	id   store.Identity
	// origin is the batch input whose pass processed it.
	origin int
}

// endProcess ends a process span with the message's result (r nil: the
// transaction did not commit, for err).
func endProcess(span trace.Span, r *seqboxtype.Result, err error) {
	if span.IsRecording() {
		switch {
		case r == nil:
			if err == nil {
				err = errNoResult
			}
			span.RecordError(err)
			span.SetStatus(codes.Error, "rolled back: "+err.Error())
		default:
			span.SetAttributes(attrOutcome.String(string(r.Outcome)))
			if r.Reason != "" {
				span.SetAttributes(attrReason.String(r.Reason))
			}
			switch r.Outcome {
			case seqboxtype.Retry, seqboxtype.DeadLettered, seqboxtype.Rejected, seqboxtype.Collision:
				span.SetStatus(codes.Error, string(r.Outcome)+": "+r.Reason)
			}
		}
	}
	span.End()
}

// endSpans ends the batch's process spans: with their results when out
// holds them (after COMMIT), as rolled back for err otherwise.
func (tx *batchTx) endSpans(out [][]seqboxtype.Result, err error) {
	if len(tx.spans) == 0 {
		return
	}
	var byID map[store.Identity]*seqboxtype.Result
	if err == nil {
		byID = map[store.Identity]*seqboxtype.Result{}
		for i := range out {
			for j := range out[i] {
				r := &out[i][j]
				byID[store.Identity{Source: r.Source, ID: r.ID}] = r
			}
		}
	}
	for _, s := range tx.spans {
		endProcess(s.span, byID[s.id], err)
	}
	tx.spans = nil
}
