package serve

// The consumers registered in the gateway's database, with their
// heartbeats, and, for the gateway's own consumer, what this server knows
// of its agent calls: GET /v1/admin/consumers.

import (
	"net/http"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/store"
)

// ConsumersView is GET /v1/admin/consumers.
type ConsumersView struct {
	Consumers []ConsumerView `json:"consumers"`
	// LiveWithinSeconds is how recent a heartbeat must be for a consumer
	// to count as live (seqbox.LiveWithin).
	LiveWithinSeconds float64 `json:"live_within_seconds"`
	// Now is the server's clock, which Live and the ages are read by.
	Now string `json:"now"`
}

// ConsumerView is one registered consumer: its registration as every
// JSON view of it shows it (ops.ConsumerLine, which `seqbox consumers
// list` prints too), and what this server adds.
type ConsumerView struct {
	ops.ConsumerLine
	HeartbeatAgeSeconds *float64 `json:"heartbeat_age_seconds"`
	// ServedHere is true for the consumer this server runs (--consumer).
	// The fields below are this server's, and only on that consumer: null
	// elsewhere, or without --agent-url.
	ServedHere bool `json:"served_here"`
	// InFlightAgentCalls counts the agent calls this server has open now.
	InFlightAgentCalls *int64 `json:"in_flight_agent_calls"`
	// AgentConcurrency is --agent-concurrency: at most that many calls.
	AgentConcurrency *int `json:"agent_concurrency"`
	// Circuit is the agent's circuit in this server (docs/design.md §10.3).
	Circuit *CircuitView `json:"circuit"`
}

// CircuitView is the state of the agent's circuit.
type CircuitView struct {
	// State is closed (dispatching), open (paused until Until) or
	// half_open (a trial call or its probe is out, or may go).
	State string `json:"state"`
	// Until is when the next trial may go, while open.
	Until *string `json:"until"`
	// FailuresInARow counts the down-agent failures in a row while closed
	// (the circuit opens at circuitThreshold).
	FailuresInARow int `json:"failures_in_a_row"`
	Threshold      int `json:"threshold"`
}

func (s *Server) listConsumers(w http.ResponseWriter, r *http.Request) {
	regs, err := s.store.Executor().ConsumerList(r.Context())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	// Heartbeats are written by the consumers' own clocks (time.Now).
	now := time.Now()
	out := ConsumersView{Consumers: make([]ConsumerView, 0, len(regs)), LiveWithinSeconds: seqbox.LiveWithin.Seconds(),
		Now: *stamp(now)}
	for _, reg := range regs {
		out.Consumers = append(out.Consumers, s.consumerView(reg, now))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) consumerView(reg store.Registration, now time.Time) ConsumerView {
	v := ConsumerView{ConsumerLine: ops.ConsumerLineOf(reg, now, seqbox.LiveWithin), ServedHere: reg.Consumer == s.opt.Consumer}
	if !reg.HeartbeatAt.IsZero() {
		age := now.Sub(reg.HeartbeatAt)
		secs := max(age, 0).Seconds()
		v.HeartbeatAgeSeconds = &secs
	}
	if v.ServedHere && s.disp != nil && s.opt.AgentURL != "" {
		n, c := s.disp.inFlight.Load(), s.opt.AgentConcurrency
		v.InFlightAgentCalls, v.AgentConcurrency = &n, &c
		cv := s.circuit.view()
		v.Circuit = &cv
	}
	return v
}

// view is the circuit as the admin API shows it.
func (c *circuit) view() CircuitView {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := CircuitView{State: "closed", FailuresInARow: c.failures, Threshold: circuitThreshold}
	if c.open {
		v.State = "open"
		if c.trial || !c.now().Before(c.until) {
			v.State = "half_open"
		}
		v.Until = stamp(c.until)
	}
	return v
}
