// Package remoteapi is a CRM-like HTTP API on loopback for the effects
// ledger's tests and demo: POST /tasks creates a task (once per
// Idempotency-Key when Dedupe is on, at every request otherwise, as many
// real APIs do), GET /tasks?key=K looks one up, and a fault can be armed
// for the next requests: apply and then drop the response, apply and then
// hang past the client's timeout, reset the connection before applying,
// refuse with 400, or apply and have the caller killed mid-call.
package remoteapi

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Fault is what the server does to one request.
type Fault int

// The faults.
const (
	// None answers normally.
	None Fault = iota
	// DropAfterApply applies the effect, then closes the connection
	// without answering.
	DropAfterApply
	// HangAfterApply applies the effect, then answers only after Hang.
	HangAfterApply
	// ResetBeforeApply resets the connection without applying.
	ResetBeforeApply
	// Refuse answers 400 without applying.
	Refuse
	// KillAfterApply applies the effect, calls OnKill (which kills the
	// calling process), then drops the connection.
	KillAfterApply
)

// Server is the fake remote API.
type Server struct {
	*httptest.Server
	// Hang is how long HangAfterApply waits. Default 5s.
	Hang time.Duration
	// Dedupe makes a repeated Idempotency-Key return the first task
	// instead of creating another. Default true.
	Dedupe bool
	// OnKill is called by KillAfterApply.
	OnKill func()

	mu       sync.Mutex
	tasks    map[string]string // idempotency key → first task id
	requests int               // POSTs received
	applied  int               // tasks created
	repeats  int               // POSTs for a key that already had a task
	perFor   map[string]int    // tasks created per logical action ("for")
	faults   []Fault
}

// Start starts the server on 127.0.0.1.
func Start() *Server {
	s := &Server{tasks: map[string]string{}, perFor: map[string]int{}, Hang: 5 * time.Second, Dedupe: true}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Arm queues faults for the next POSTs, in order.
func (s *Server) Arm(f ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f...)
}

// Counts returns the POSTs received, the tasks created and the POSTs that
// repeated a key already applied (answered from the record, not applied
// again).
func (s *Server) Counts() (requests, applied, repeats int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.applied, s.repeats
}

// Duplicates counts tasks created beyond the first for one logical action
// (the "for" member of the request body).
func (s *Server) Duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.perFor {
		n += c - 1
	}
	return n
}

// Task returns the task created for an idempotency key.
func (s *Server) Task(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.tasks[key]
	return id, ok
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/tasks":
		id, ok := s.Task(r.URL.Query().Get("key"))
		if !ok {
			http.Error(w, "no such task", http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
	case r.Method == http.MethodPost && r.URL.Path == "/tasks":
		s.create(w, r)
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	s.requests++
	fault := None
	if len(s.faults) > 0 {
		fault, s.faults = s.faults[0], s.faults[1:]
	}
	s.mu.Unlock()
	if key == "" {
		http.Error(w, "Idempotency-Key is required", http.StatusBadRequest)
		return
	}
	switch fault {
	case Refuse:
		http.Error(w, "refused", http.StatusBadRequest)
		return
	case ResetBeforeApply:
		reset(w)
		return
	}
	var body struct {
		For string `json:"for"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	id := s.apply(key, body.For)
	switch fault {
	case DropAfterApply:
		reset(w)
		return
	case KillAfterApply:
		if s.OnKill != nil {
			s.OnKill()
		}
		reset(w)
		return
	case HangAfterApply:
		select {
		case <-time.After(s.Hang):
		case <-r.Context().Done():
			return
		}
	}
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

// apply creates the task for key; with Dedupe a repeat returns the first.
func (s *Server) apply(key, forAction string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.tasks[key]; ok {
		s.repeats++
		if s.Dedupe {
			return id
		}
	}
	s.applied++
	id := fmt.Sprintf("task-%d", s.applied)
	if _, ok := s.tasks[key]; !ok {
		s.tasks[key] = id
	}
	s.perFor[forAction]++
	return id
}

// reset closes the connection with a TCP reset and no answer.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
