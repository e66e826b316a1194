package seqbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/transport"
)

// Producer contexts the test's events carry: one in the envelope, one in
// the broker's headers only.
const (
	envelopeTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	envelopeSpan  = "00f067aa0ba902b7"
	headerTrace   = "0af7651916cd43dd8448eb211c80319c"
	headerSpan    = "b7ad6b7169203331"
)

// headerQueue hands out the embedded queue's deliveries with broker
// headers: the trace context of messages named in headers.
type headerQueue struct {
	transport.Transport
	headers map[string]string // id → traceparent
}

type headerDelivery struct {
	transport.Delivery
	traceparent string
}

func (d headerDelivery) Header(name string) string {
	if name == "traceparent" {
		return d.traceparent
	}
	return ""
}

func (q headerQueue) Receive(ctx context.Context, max int) ([]transport.Delivery, error) {
	ds, err := q.Transport.Receive(ctx, max)
	for i, d := range ds {
		for id, tp := range q.headers {
			if strings.Contains(string(d.Body()), `"id":"`+id+`"`) {
				ds[i] = headerDelivery{Delivery: d, traceparent: tp}
			}
		}
	}
	return ds, err
}

// capture is an outbox publisher that keeps what it publishes.
type capture struct {
	mu     sync.Mutex
	bodies []string
}

func (c *capture) Publish(_ context.Context, body []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bodies = append(c.bodies, string(body))
	return nil
}

// TestTracingFollowsTheMessage runs three messages through Run with a
// recording tracer provider, a decider that calls a remote API through
// the effects ledger and a handler that emits to the outbox, and checks
// the spans docs/design.md §22 promises: each message's process span in
// its producer's trace (from the envelope's traceparent, or the broker's
// header), with its outcome; the decision, the external call and the
// settle in the same trace; the remote request and the emitted event
// carrying it.
func TestTracingFollowsTheMessage(t *testing.T) {
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(ctx) })

	var remoteMu sync.Mutex
	var remoteTraceparents []string
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		remoteMu.Lock()
		remoteTraceparents = append(remoteTraceparents, r.Header.Get("traceparent"))
		remoteMu.Unlock()
		fmt.Fprint(w, `{"task":"T-1"}`)
	}))
	t.Cleanup(remote.Close)

	b := setup(t)
	ledger, err := effects.New(b.store, effects.Config{})
	require.NoError(t, err)
	q := openQueue(t, b.path, 5*time.Second)
	b.cfg.Transport = headerQueue{Transport: q, headers: map[string]string{"from-header": "00-" + headerTrace + "-" + headerSpan + "-01"}}
	b.cfg.Logger, b.cfg.TracerProvider = quietLogger, tp
	b.cfg.Decide = func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		if ev.ID == "poison" {
			return []byte(`{}`), nil
		}
		ref, err := ledger.Do(ctx, "crm.create_task", effects.HTTP(nil, func(ctx context.Context) (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodPost, remote.URL+"/tasks", strings.NewReader(`{}`))
		}, func(*http.Response) (string, error) { return "T-1", nil }))
		return []byte(ref), err
	}
	b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		if ev.ID == "poison" {
			return seqbox.Permanent(errors.New("no such customer"))
		}
		return outbox.Emit(ctx, tx, fmt.Appendf(nil, `{"specversion":"1.0","id":"task-for-%s","source":"crm","type":"task.created"}`, ev.ID))
	}
	c := b.consumer(t)

	require.NoError(t, q.Publish(ctx, []byte(`{"specversion":"1.0","id":"from-envelope","source":"crm","type":"deal.won","partitionkey":"opp-1","objectversion":1,`+
		`"traceparent":"00-`+envelopeTrace+`-`+envelopeSpan+`-01"}`)))
	require.NoError(t, q.Publish(ctx, []byte(`{"specversion":"1.0","id":"from-header","source":"crm","type":"deal.won","partitionkey":"opp-2","objectversion":1}`)))
	require.NoError(t, q.Publish(ctx, []byte(`{"specversion":"1.0","id":"poison","source":"crm","type":"deal.won","partitionkey":"opp-3","objectversion":1}`)))
	runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, c.RunUntilIdle(runCtx, 300*time.Millisecond))

	spans := rec.Ended()
	for _, want := range []struct{ id, trace, parent string }{
		{"from-envelope", envelopeTrace, envelopeSpan},
		{"from-header", headerTrace, headerSpan},
	} {
		var process []sdktrace.ReadOnlySpan
		for _, s := range spans {
			if s.Name() == "process test" && attr(s, "messaging.message.id") == want.id {
				process = append(process, s)
			}
		}
		require.NotEmpty(t, process, "%s: no process span", want.id)
		last := process[len(process)-1]
		require.Equal(t, want.trace, last.SpanContext().TraceID().String(), "%s: the process span continues the producer's trace", want.id)
		require.Equal(t, "applied", attr(last, "seqbox.outcome"), want.id)
		require.Equal(t, "opp-"+map[string]string{"from-envelope": "1", "from-header": "2"}[want.id], attr(last, "seqbox.partitionkey"))
		require.Equal(t, "1", attr(last, "seqbox.objectversion"))
		require.Equal(t, "process", attr(last, "messaging.operation.type"))
		require.Equal(t, trace.SpanKindConsumer, last.SpanKind())
		require.True(t, linksTo(last, want.parent), "%s: the process span links to the producer's context", want.id)
		for _, name := range []string{"decide test", "effect crm.create_task", "ack test"} {
			require.True(t, inTrace(spans, name, want.trace), "%s: no %q span in the producer's trace", want.id, name)
		}
	}
	for _, s := range spans {
		if s.Name() == "effect crm.create_task" {
			require.Equal(t, "succeeded", attr(s, "seqbox.effect.state"))
		}
		if s.Name() == "ack test" {
			require.Equal(t, "settle", attr(s, "messaging.operation.type"))
		}
	}
	var receive bool
	for _, s := range spans {
		if s.Name() == "receive test" && linksTo(s, envelopeSpan) {
			receive = true
		}
	}
	require.True(t, receive, "a receive span links to the producer of the message it handed out")

	var poison sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "process test" && attr(s, "messaging.message.id") == "poison" && attr(s, "seqbox.outcome") != "deciding" {
			poison = s
		}
	}
	require.NotNil(t, poison, "the poison message's process span")
	require.Equal(t, "dead_lettered", attr(poison, "seqbox.outcome"))
	require.Equal(t, codes.Error, poison.Status().Code)
	require.Contains(t, poison.Status().Description, "no such customer")

	remoteMu.Lock()
	got := strings.Join(remoteTraceparents, " ")
	remoteMu.Unlock()
	require.Contains(t, got, "-"+envelopeTrace+"-", "the remote request carries the message's trace")
	require.Contains(t, got, "-"+headerTrace+"-")

	pub := &capture{}
	relay, err := outbox.NewRelay(b.store, pub, outbox.Config{})
	require.NoError(t, err)
	_, err = relay.RunOnce(ctx)
	require.NoError(t, err)
	emitted := strings.Join(pub.bodies, "\n")
	require.Contains(t, emitted, `"id":"task-for-from-envelope"`)
	require.Contains(t, emitted, `"traceparent":"00-`+envelopeTrace+`-`, "an emitted event continues the trace of the message that emitted it")
	require.Contains(t, emitted, `"traceparent":"00-`+headerTrace+`-`)
}

// TestTracingRecordsNothingByDefault: without a TracerProvider the
// consumer uses the global one, which records nothing until a program
// installs one, and a handler still sees the producer's context (so the
// calls it makes carry it on).
func TestTracingRecordsNothingByDefault(t *testing.T) {
	b := setup(t)
	var seen trace.SpanContext
	b.cfg.Handler = func(ctx context.Context, _ seqbox.Tx, _ seqboxtype.Event) error {
		seen = trace.SpanContextFromContext(ctx)
		return nil
	}
	c := b.consumer(t)
	_, err := c.Deliver(context.Background(), []byte(`{"specversion":"1.0","id":"a","source":"crm","type":"t","traceparent":"00-`+envelopeTrace+`-`+envelopeSpan+`-01"}`), 1)
	require.NoError(t, err)
	require.Equal(t, envelopeTrace, seen.TraceID().String())
	require.False(t, trace.SpanFromContext(context.Background()).IsRecording())
}

// TestTracingEndsSpansOfDeliverTx: a delivery in the caller's transaction
// ends its process span with the result it hands the caller.
func TestTracingEndsSpansOfDeliverTx(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	b := setup(t)
	b.cfg.TracerProvider = tp
	b.cfg.Handler = func(context.Context, seqbox.Tx, seqboxtype.Event) error { return nil }
	c := b.consumer(t)
	ctx := context.Background()
	tx, err := b.store.DB().BeginTx(ctx, &sql.TxOptions{})
	require.NoError(t, err)
	_, err = c.DeliverTx(ctx, tx, []byte(`{"specversion":"1.0","id":"in-tx","source":"crm","type":"t"}`), 1)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	spans := rec.Ended()
	require.Len(t, spans, 1)
	require.Equal(t, "applied", attr(spans[0], "seqbox.outcome"))
	require.False(t, spans[0].Parent().IsValid(), "no producer context: a root span")
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if kv.Key == attribute.Key(key) {
			return kv.Value.String()
		}
	}
	return ""
}

func linksTo(s sdktrace.ReadOnlySpan, spanID string) bool {
	for _, l := range s.Links() {
		if l.SpanContext.SpanID().String() == spanID {
			return true
		}
	}
	return false
}

func inTrace(spans []sdktrace.ReadOnlySpan, name, traceID string) bool {
	for _, s := range spans {
		if s.Name() == name && s.SpanContext().TraceID().String() == traceID {
			return true
		}
	}
	return false
}
