package outbox

import (
	"bytes"
	"context"
	"strconv"

	"go.opentelemetry.io/otel/propagation"
)

// withTraceContext returns event with the CloudEvents distributed-tracing
// extension set to ctx's span (traceparent, and tracestate when there is
// one), so the consumer of the emitted event continues the trace of the
// message whose handler emitted it. An event that carries a traceparent
// of its own, or a ctx without a span, leaves event as it is. event is a
// validated structured-mode CloudEvent (a JSON object).
func withTraceContext(ctx context.Context, event []byte, has bool) []byte {
	if has {
		return event
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	tp := carrier.Get("traceparent")
	if tp == "" {
		return event
	}
	open := bytes.IndexByte(event, '{')
	if open < 0 {
		return event
	}
	var b bytes.Buffer
	b.Grow(len(event) + 128)
	b.Write(event[:open+1])
	b.WriteString(`"traceparent":` + strconv.Quote(tp))
	if ts := carrier.Get("tracestate"); ts != "" {
		b.WriteString(`,"tracestate":` + strconv.Quote(ts))
	}
	if rest := bytes.TrimLeft(event[open+1:], " \t\r\n"); len(rest) > 0 && rest[0] != '}' {
		b.WriteByte(',')
	}
	b.Write(event[open+1:])
	return b.Bytes()
}
