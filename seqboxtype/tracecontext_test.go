package seqboxtype

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The distributed-tracing extension is read, leniently, and is volatile.
func TestParseEventReadsTraceContext(t *testing.T) {
	ev, err := ParseEvent([]byte(`{"specversion":"1.0","id":"a","source":"s","type":"t","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"k=v"}`))
	require.NoError(t, err)
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ev.TraceParent)
	require.Equal(t, "k=v", ev.TraceState)
	bare, err := ParseEvent([]byte(`{"specversion":"1.0","id":"a","source":"s","type":"t"}`))
	require.NoError(t, err)
	require.Equal(t, bare.Hash, ev.Hash, "trace context is volatile")

	odd, err := ParseEvent([]byte(`{"specversion":"1.0","id":"a","source":"s","type":"t","traceparent":7,"tracestate":{"k":"v"}}`))
	require.NoError(t, err, "a malformed trace context costs the event nothing")
	require.Empty(t, odd.TraceParent)
	require.Empty(t, odd.TraceState)
}
