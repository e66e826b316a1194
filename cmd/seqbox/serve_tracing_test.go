package main

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/seqbox/seqbox/internal/waitfor"
)

// otlpSpan is a span as an OTLP/HTTP receiver got it.
type otlpSpan struct {
	trace, id, parent, name string
	attrs                   map[string]string
}

// otlpReceiver is a real OTLP/HTTP trace receiver on loopback: it decodes
// the protobuf export requests a collector would.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want POST /v1/traces, application/x-protobuf", http.StatusUnsupportedMediaType)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var ex coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					sp := otlpSpan{trace: hex.EncodeToString(s.GetTraceId()), id: hex.EncodeToString(s.GetSpanId()),
						parent: hex.EncodeToString(s.GetParentSpanId()), name: s.GetName(), attrs: map[string]string{}}
					for _, kv := range s.GetAttributes() {
						sp.attrs[kv.GetKey()] = otlpValue(kv.GetValue())
					}
					r.spans = append(r.spans, sp)
				}
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

// otlpValue renders an OTLP attribute value.
func otlpValue(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	}
	return v.String()
}

// inTrace returns the spans of one trace, sorted by name.
func (r *otlpReceiver) inTrace(traceID string) []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []otlpSpan
	for _, s := range r.spans {
		if s.trace == traceID {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// With OTEL_EXPORTER_OTLP_ENDPOINT pointing at a local OTLP/HTTP
// receiver, an event ingested with a traceparent (structured attribute,
// or the binary mode's ce-traceparent header) reaches the agent with the
// same trace id, and the receiver gets the spans of that trace.
func TestServeTracesReachTheAgentAndTheCollector(t *testing.T) {
	receiver := newOTLPReceiver(t)
	var mu sync.Mutex
	agentSaw := map[string]string{} // event id → traceparent header
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		for _, id := range []string{"traced-structured", "traced-binary"} {
			if strings.Contains(string(body), `"id":"`+id+`"`) {
				agentSaw[id] = r.Header.Get("traceparent")
			}
		}
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(agent.Close)

	s := startServe(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + receiver.URL, "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=seqbox-test"},
		"--db", t.TempDir()+"/seqbox.db", "--admin-token", serveToken, "--agent-url", agent.URL)
	const (
		structuredTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		binaryTrace     = "0af7651916cd43dd8448eb211c80319c"
	)
	code, _ := s.do(t, http.MethodPost, "/v1/events", "", map[string]string{"Content-Type": "application/cloudevents+json"},
		`{"specversion":"1.0","id":"traced-structured","source":"crm","type":"deal.won","partitionkey":"opp-1","objectversion":1,`+
			`"traceparent":"00-`+structuredTrace+`-00f067aa0ba902b7-01"}`)
	require.Equal(t, http.StatusAccepted, code)
	code, _ = s.do(t, http.MethodPost, "/v1/events", "", map[string]string{"Content-Type": "application/json",
		"ce-specversion": "1.0", "ce-id": "traced-binary", "ce-source": "crm", "ce-type": "deal.won",
		"ce-partitionkey": "opp-2", "ce-objectversion": "1", "ce-traceparent": "00-" + binaryTrace + "-b7ad6b7169203331-01"}, `{}`)
	require.Equal(t, http.StatusAccepted, code)

	waitfor.That(t, 30*time.Second, "the agent got both events", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(agentSaw) == 2
	})
	mu.Lock()
	require.Contains(t, agentSaw["traced-structured"], "00-"+structuredTrace+"-", "the agent's request continues the ingest's trace")
	require.Contains(t, agentSaw["traced-binary"], "00-"+binaryTrace+"-")
	mu.Unlock()

	for _, tr := range []string{structuredTrace, binaryTrace} {
		waitfor.That(t, 30*time.Second, "the receiver got the trace's process, decide and ack spans", func() bool {
			names := map[string]bool{}
			for _, sp := range receiver.inTrace(tr) {
				names[sp.name] = true
			}
			return names["process gateway"] && names["decide gateway"] && names["ack gateway"] && names["effect agent"]
		})
	}
	var applied bool
	for _, sp := range receiver.inTrace(structuredTrace) {
		t.Logf("trace %s span %s parent %s %q %v", sp.trace, sp.id, sp.parent, sp.name, sp.attrs)
		applied = applied || (sp.name == "process gateway" && sp.attrs["seqbox.outcome"] == "applied")
	}
	require.True(t, applied, "a process span of the trace records the event applied")
}

// A failing agent call is in serve's output within seconds, naming the
// event (source, id, key, version) and why it failed, in text or JSON.
func TestServeLogsAFailingAgentCall(t *testing.T) {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "model backend unavailable", http.StatusInternalServerError)
	}))
	t.Cleanup(agent.Close)
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			s := startServe(t, nil, "--db", t.TempDir()+"/seqbox.db", "--admin-token", serveToken, "--agent-url", agent.URL, "--log-format", format)
			code, _ := s.do(t, http.MethodPost, "/v1/events", "", map[string]string{"Content-Type": "application/cloudevents+json"},
				ce("fails-at-agent", "opp-9", 1, `{}`))
			require.Equal(t, http.StatusAccepted, code)
			waitfor.That(t, 10*time.Second, "serve logs the failed agent call", func() bool {
				return strings.Contains(s.stderrText(), "agent call failed")
			})
			var line string
			for l := range strings.SplitSeq(s.stderrText(), "\n") {
				if strings.Contains(l, "agent call failed") {
					line = l
					break
				}
			}
			if format == "text" {
				for _, want := range []string{"source=crm", "id=fails-at-agent", "partitionkey=opp-9", "objectversion=1", "500"} {
					require.Contains(t, line, want)
				}
				return
			}
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec), "one JSON record a line: %s", line)
			require.Equal(t, "WARN", rec["level"])
			require.Equal(t, "fails-at-agent", rec["id"])
			require.Equal(t, "opp-9", rec["partitionkey"])
			require.EqualValues(t, 1, rec["objectversion"])
			require.Contains(t, rec["err"], "500")
		})
	}
}
