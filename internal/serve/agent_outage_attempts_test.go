package serve

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/stretchr/testify/require"
)

// While nothing listens at --agent-url, an event's dispatch was never
// sent: that is the agent's outage, not the event's failure, and it
// spends none of the event's attempts (as the open circuit spends none).
// Before, the refused dials that opened the circuit were the first
// event's attempts: with --max-attempts 2 it was dead-lettered before the
// circuit ever opened, and with 5 it lost 3. Once the agent listens, the
// event applies.
func TestAnAgentOutageSpendsNoAttempts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	policy := seqbox.Config{}
	policy.Retry = seqbox.RetryPolicy{MaxAttempts: 2, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	r := start(t, Options{AgentURL: "http://" + addr + "/", Policy: policy})
	r.post(t, ev("o1", "K", 1, ""))
	eventually(t, "the circuit open", func() bool {
		return r.metricValue(t, `seqbox_gateway_agent_circuit_open{consumer="gateway"}`) == 1
	})
	require.NotEqual(t, "dead_lettered", r.outcome(t, "o1"), "the outage spent the event's attempts")

	// The agent comes up where it was expected.
	up, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })}
	go func() { _ = srv.Serve(up) }()
	t.Cleanup(func() { _ = srv.Close() })
	eventually(t, "o1 applied", func() bool { return r.outcome(t, "o1") == "applied" })
}
