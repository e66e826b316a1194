package serve

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seqbox/seqbox"
	"github.com/stretchr/testify/require"
)

// A 3xx from the agent is a definite failure with a reason: the POST is
// neither turned into a bodiless GET (which answered 2xx and recorded the
// event applied without delivering it) nor re-posted, with its
// Idempotency-Key, wherever Location points.
func TestAgentRedirectIsNotFollowed(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(other.Close)
	agent := newFakeAgent(t, func(id string, n int, w http.ResponseWriter) {
		w.Header().Set("Location", other.URL+"/"+id)
		if id == "r1" {
			w.WriteHeader(http.StatusFound)
		} else {
			w.WriteHeader(http.StatusTemporaryRedirect)
		}
	})
	r := start(t, Options{AgentURL: agent.URL})
	r.post(t, `{"specversion":"1.0","id":"r1","source":"crm","type":"t","partitionkey":"k1","objectversion":1}`)
	r.post(t, `{"specversion":"1.0","id":"r2","source":"crm","type":"t","partitionkey":"k2","objectversion":1}`)
	eventually(t, "both dead-lettered", func() bool {
		return r.outcome(t, "r1") == "dead_lettered" && r.outcome(t, "r2") == "dead_lettered"
	})
	require.Zero(t, elsewhere.Load(), "the event went where the redirect pointed")
	dlq := list(t, r.admin(t, "GET", "/v1/admin/dlq", "", http.StatusOK), "dead_letters")
	require.Len(t, dlq, 2)
	for _, d := range dlq {
		require.Contains(t, fmt.Sprint(d["last_error"]), "redirects are not followed")
	}
	require.Len(t, agent.snapshot(), 2, "each asked once: a redirect is not retried")
}

// 408 and 429 are transient: the event is retried under the same
// Idempotency-Key, after at least the Retry-After the agent asked for,
// and is applied, not dead-lettered.
func TestAgentTooManyRequestsIsRetried(t *testing.T) {
	agent := newFakeAgent(t, func(id string, n int, w http.ResponseWriter) {
		switch {
		case id == "t1" && n == 0:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case id == "t2" && n == 0:
			w.WriteHeader(http.StatusRequestTimeout)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	r := start(t, Options{AgentURL: agent.URL})
	r.post(t, `{"specversion":"1.0","id":"t1","source":"crm","type":"t","partitionkey":"k1","objectversion":1}`)
	r.post(t, `{"specversion":"1.0","id":"t2","source":"crm","type":"t","partitionkey":"k2","objectversion":1}`)
	eventually(t, "both applied", func() bool { return r.outcome(t, "t1") == "applied" && r.outcome(t, "t2") == "applied" })
	keys := map[string]map[string]bool{}
	for _, c := range agent.snapshot() {
		if keys[c.ID] == nil {
			keys[c.ID] = map[string]bool{}
		}
		keys[c.ID][c.IdemKey] = true
	}
	require.Len(t, keys["t1"], 1, "one Idempotency-Key per event")
	require.Len(t, keys["t2"], 1)
	dlq := list(t, r.admin(t, "GET", "/v1/admin/dlq", "", http.StatusOK), "dead_letters")
	require.Empty(t, dlq)
}

// An agent that is down (a deploy's restart) opens the circuit: dispatch
// pauses and probes instead of spending every message's attempts, /readyz
// says so, and once the agent is back everything is applied and nothing
// is dead-lettered.
func TestAgentOutageDeadLettersNothing(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	var whileDown atomic.Int64
	agent := newFakeAgent(t, func(id string, n int, w http.ResponseWriter) {
		if !down.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		if whileDown.Add(1)%2 == 0 {
			// A reset connection, as a process being restarted gives.
			hj, ok := w.(http.Hijacker)
			if ok {
				conn, _, err := hj.Hijack()
				if err == nil {
					conn.Close()
					return
				}
			}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	// Two attempts per message: without the circuit, a few failures each
	// would dead-letter them all.
	r := start(t, Options{AgentURL: agent.URL, Policy: policyWithAttempts(2)})
	const n = 12
	for i := range n {
		r.post(t, fmt.Sprintf(`{"specversion":"1.0","id":"o%d","source":"crm","type":"t","partitionkey":"k%d","objectversion":%d}`, i, i%4, i/4+1))
	}
	eventually(t, "the circuit to open", func() bool {
		_, body, _ := r.call(t, "GET", "/readyz", "", nil, "")
		checks, _ := body["checks"].(map[string]any)
		return strings.HasPrefix(fmt.Sprint(checks["agent"]), "circuit open")
	})
	// Probes keep failing for a while: still nothing dead-lettered.
	seen := whileDown.Load()
	eventually(t, "two probes while down", func() bool { return whileDown.Load() >= seen+2 })
	down.Store(false)
	eventually(t, "all applied", func() bool {
		for i := range n {
			if r.outcome(t, fmt.Sprintf("o%d", i)) != "applied" {
				return false
			}
		}
		return true
	})
	require.Empty(t, list(t, r.admin(t, "GET", "/v1/admin/dlq", "", http.StatusOK), "dead_letters"))
	_, body, _ := r.call(t, "GET", "/readyz", "", nil, "")
	require.Equal(t, "ok", body["checks"].(map[string]any)["agent"])
}

// The agent is called with bounded concurrency (--agent-concurrency).
func TestAgentConcurrencyIsBounded(t *testing.T) {
	var mu sync.Mutex
	inflight, peak := 0, 0
	release := make(chan struct{})
	agent := newFakeAgent(t, func(id string, n int, w http.ResponseWriter) {
		mu.Lock()
		inflight++
		peak = max(peak, inflight)
		mu.Unlock()
		<-release
		mu.Lock()
		inflight--
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
	r := start(t, Options{AgentURL: agent.URL, AgentConcurrency: 2})
	for i := range 8 {
		r.post(t, fmt.Sprintf(`{"specversion":"1.0","id":"c%d","source":"crm","type":"t","partitionkey":"k%d"}`, i, i))
	}
	eventually(t, "two calls in flight", func() bool { return len(agent.snapshot()) >= 2 })
	close(release)
	eventually(t, "all applied", func() bool {
		for i := range 8 {
			if r.outcome(t, fmt.Sprintf("c%d", i)) != "applied" {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	require.LessOrEqual(t, peak, 2)
}

// policyWithAttempts is a policy whose messages get n attempts.
func policyWithAttempts(n int) seqbox.Config {
	return seqbox.Config{Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: n}}}
}
