package outbox

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

func TestWithTraceContextStampsOnlyWhatHasNone(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	const want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, in := range []string{`{"id":"a"}`, `{}`, "  {\n }\n", `{ "id" : "a" }`} {
		out := withTraceContext(ctx, []byte(in), false)
		var m map[string]any
		require.NoError(t, json.Unmarshal(out, &m), "%q → %q", in, out)
		require.Equal(t, want, m["traceparent"], "%q", in)
	}
	require.Equal(t, `{"traceparent":"x"}`, string(withTraceContext(ctx, []byte(`{"traceparent":"x"}`), true)), "its own traceparent is kept")
	require.Equal(t, `{"id":"a"}`, string(withTraceContext(context.Background(), []byte(`{"id":"a"}`), false)), "no span: unchanged")
}
