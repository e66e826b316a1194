package transporttest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/seqbox/seqbox/transport"
)

// testTraceContextTravels: an event's W3C trace context reaches the
// consumer. A transport whose deliveries carry broker headers
// (transport.HeaderCarrier) has the publisher's traceparent and
// tracestate there as well as in the body; one without headers (the
// embedded queue) keeps them in the body, byte for byte.
func testTraceContextTravels(t *testing.T, h Harness) {
	const tp, ts = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=abc"
	b := h.NewBroker(t)
	body := []byte(`{"specversion":"1.0","id":"traced-1","source":"transporttest","type":"test.event","partitionkey":"trace-1",` +
		`"objectversion":1,"traceparent":"` + tp + `","tracestate":"` + ts + `"}`)
	b.publish(t, body)
	tr := b.open(t)
	got := Receive(t, tr, 1, 30*time.Second)
	if !bytes.Equal(got[0].Body(), body) {
		t.Fatalf("body changed in transit:\n got %s\nwant %s", got[0].Body(), body)
	}
	if h, ok := got[0].(transport.HeaderCarrier); ok {
		if g := h.Header(transport.HeaderTraceParent); g != tp {
			t.Fatalf("traceparent header = %q, want %q", g, tp)
		}
		if g := h.Header(transport.HeaderTraceState); g != ts {
			t.Fatalf("tracestate header = %q, want %q", g, ts)
		}
		if g := h.Header("no-such-header"); g != "" {
			t.Fatalf("an absent header reads %q, want empty", g)
		}
	}
	if err := got[0].Ack(context.Background()); err != nil {
		t.Fatalf("ack: %v", err)
	}
}
