package serve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/store"
)

// consumerByName is GET /v1/admin/consumers's entry for name (nil: none).
func consumerByName(t *testing.T, r *running, name string) map[string]any {
	t.Helper()
	for _, c := range list(t, r.admin(t, "GET", "/v1/admin/consumers", "", 200), "consumers") {
		if c["name"] == name {
			return c
		}
	}
	return nil
}

// GET /v1/admin/consumers lists every registered consumer with its
// policies, process and heartbeat, live when the heartbeat is within
// seqbox.LiveWithin; a consumer that stopped beating is listed, not live;
// the gateway's own consumer is marked, and carries what this server
// knows of its agent calls (nothing without an agent).
func TestAdminConsumers(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := start(t, Options{DB: db(t)})
			old := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
			require.NoError(t, r.store.Executor().ConsumerRegister(context.Background(), store.Registration{Consumer: "billing",
				HandlerKind: store.HandlerApplication, Policies: []byte(`{"gap_policy":"hold"}`), Process: "box-2:77",
				StartedAt: old, HeartbeatAt: old.Add(time.Minute)}))
			require.NoError(t, r.store.Executor().ConsumerRegister(context.Background(), store.Registration{Consumer: "audit-only",
				HandlerKind: store.HandlerRecord, Process: "box-3:1", StartedAt: old}))
			var gw map[string]any
			eventually(t, "the gateway's consumer registered and beating", func() bool {
				gw = consumerByName(t, r, "gateway")
				return gw != nil && gw["live"] == true
			})
			body := r.admin(t, "GET", "/v1/admin/consumers", "", 200)
			require.Equal(t, seqbox.LiveWithin.Seconds(), body["live_within_seconds"])
			var names []string
			for _, c := range list(t, body, "consumers") {
				names = append(names, c["name"].(string))
			}
			require.Equal(t, []string{"audit-only", "billing", "gateway"}, names, "by name")

			require.Equal(t, true, gw["served_here"])
			require.NotEmpty(t, gw["process"])
			require.NotEmpty(t, gw["handler_kind"])
			pol, ok := gw["policies"].(map[string]any)
			require.True(t, ok, "policies is the registered object: %v", gw["policies"])
			require.Contains(t, pol, "gap_policy")
			for _, f := range []string{"started_at", "heartbeat_at"} {
				_, err := time.Parse(time.RFC3339, gw[f].(string))
				require.NoError(t, err, f)
			}
			require.Nil(t, gw["in_flight_agent_calls"], "no agent: nothing to count")
			require.Nil(t, gw["circuit"])

			billing := consumerByName(t, r, "billing")
			require.Equal(t, map[string]any{"gap_policy": "hold"}, billing["policies"])
			require.Equal(t, []any{"application", "box-2:77", false, false}, []any{billing["handler_kind"], billing["process"], billing["live"], billing["served_here"]})
			require.Equal(t, old.Add(time.Minute).Format(time.RFC3339Nano), billing["heartbeat_at"])
			require.InDelta(t, 59*60, billing["heartbeat_age_seconds"], 60)
			require.Nil(t, billing["in_flight_agent_calls"])

			never := consumerByName(t, r, "audit-only")
			require.Equal(t, map[string]any{}, never["policies"], "no policies registered: an empty object")
			require.Nil(t, never["heartbeat_at"], "never ran: no heartbeat")
			require.Equal(t, false, never["live"])

			code, _, _ := r.call(t, "GET", "/v1/admin/consumers", "", nil, "")
			require.Equal(t, http.StatusUnauthorized, code)
		})
	}
}

// With an agent, the gateway's own consumer shows its agent calls in
// flight (a call the agent holds counts until it answers) and the
// circuit: closed, then open once the agent fails as a down agent does.
func TestAdminConsumersAgentCallsAndCircuit(t *testing.T) {
	release := make(chan struct{})
	failing := make(chan struct{})
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		switch r.Header.Get(HeaderPartitionKey) {
		case "slow":
			<-release
		case "down":
			<-failing
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(agent.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	r := start(t, Options{AgentURL: agent.URL, AgentConcurrency: 4})
	r.post(t, ev("slow-1", "slow", 1, `{}`))
	eventually(t, "one agent call in flight", func() bool {
		gw := consumerByName(t, r, "gateway")
		return gw != nil && gw["in_flight_agent_calls"] == float64(1)
	})
	gw := consumerByName(t, r, "gateway")
	require.EqualValues(t, 4, gw["agent_concurrency"])
	circ := gw["circuit"].(map[string]any)
	require.Equal(t, "closed", circ["state"])
	require.Nil(t, circ["until"])
	require.EqualValues(t, circuitThreshold, circ["threshold"])
	close(release)
	eventually(t, "no call in flight once the agent answered", func() bool {
		return consumerByName(t, r, "gateway")["in_flight_agent_calls"] == float64(0)
	})

	close(failing)
	for i := range circuitThreshold {
		r.post(t, ev("down-"+itoa(int64(i)), "down", i+1, `{}`))
	}
	eventually(t, "the circuit open after the agent failed as a down agent does", func() bool {
		c := consumerByName(t, r, "gateway")["circuit"].(map[string]any)
		return c["state"] == "open" || c["state"] == "half_open"
	})
	c := consumerByName(t, r, "gateway")["circuit"].(map[string]any)
	_, err := time.Parse(time.RFC3339, c["until"].(string))
	require.NoError(t, err)
}
