package effects

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// instrumentationName names the ledger's tracer.
const instrumentationName = "github.com/seqbox/seqbox/effects"

// startSpan starts the span of one external call through the ledger, with
// the tracer provider of ctx's span: inside a Handler or Decider, the
// consumer's (a child of the message's process or decide span), so the
// remote request (effects.HTTP) carries the message's trace.
func startSpan(ctx context.Context, action, key string) (context.Context, trace.Span) {
	tp := trace.SpanFromContext(ctx).TracerProvider()
	ctx, span := tp.Tracer(instrumentationName).Start(ctx, "effect "+action, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("seqbox.effect.action", action), attribute.String("seqbox.effect.idempotency_key", key))
	}
	return ctx, span
}

// endSpan ends the call's span with the state the call left its effect in.
func endSpan(span trace.Span, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("seqbox.effect.state", string(stateAfter(err))))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// stateAfter is the state an effect is in after Do returned err ("" when
// the ledger itself failed and the state is unknown).
func stateAfter(err error) State {
	var uncertain *UncertainError
	var inFlight *InFlightError
	switch {
	case err == nil:
		return Succeeded
	case errors.As(err, &uncertain):
		return Uncertain
	case errors.As(err, &inFlight):
		return Pending
	case IsDefinite(err):
		return Failed
	}
	return ""
}
