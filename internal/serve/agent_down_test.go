package serve

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/stretchr/testify/require"
)

// An agent that is down (nothing listens at --agent-url: every dial is
// refused) opens the circuit after circuitThreshold calls in a row, as a
// 503 does; a call whose own context ended first says nothing of the
// agent and counts for nothing. (With the two cases swapped, every test
// of the package passed: the circuit never opened on a dead agent.)
func TestAgentThatRefusesConnectionsOpensTheCircuit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String() + "/agent"
	require.NoError(t, ln.Close()) // nothing listens there now
	newDispatcher := func() *dispatcher {
		a := &dispatcher{url: url, consumer: "gw", client: newAgentClient(5*time.Second, 1), now: time.Now,
			metrics: newGatewayMetrics(prometheus.NewRegistry()), tokens: &tokens{key: make([]byte, 32)}}
		a.circuit = newCircuit(time.Now, a.probe, nil)
		return a
	}
	ev := seqboxtype.Event{Source: "crm", ID: "d1", PartitionKey: "k1",
		Raw: []byte(`{"specversion":"1.0","id":"d1","source":"crm","type":"t","partitionkey":"k1"}`)}

	a := newDispatcher()
	for i := range circuitThreshold {
		_, err := a.call(context.Background(), ev, "sbx-d1")
		require.Error(t, err)
		require.False(t, effects.IsDefinite(err), "a refused dial is a down agent's failure, not a request that can never be sent: %v", err)
		open, _ := a.circuit.state()
		require.Equal(t, i == circuitThreshold-1, open, "after %d refused calls", i+1)
	}

	// Calls whose context ended before they could dial: the agent's
	// health is unknown, and the circuit stays closed.
	a = newDispatcher()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range circuitThreshold {
		_, err := a.call(ctx, ev, "sbx-d1")
		require.Error(t, err)
	}
	open, _ := a.circuit.state()
	require.False(t, open, "calls given up by their caller opened the circuit")
	require.Zero(t, a.circuit.failures)
}
