package chaos

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// faultyAgent is the agent of the serve target: an HTTP server on
// loopback that applies each event once per Idempotency-Key (the agent
// contract) and fails at random the ways real agents do: 5xx, 429 with
// Retry-After, calls slower than the gateway's timeout, answers lost after
// the effect was applied, slow calls, and outages of several seconds. It
// is also the oracle's witness: it records every call and every effect.
type faultyAgent struct {
	srv *http.Server
	url string

	mu sync.Mutex
	r  *rand.Rand
	// byKey is the idempotency key of each event id's calls (all of them);
	// payloads the payload hashes each id was sent with.
	byKey    map[string]map[string]bool
	payloads map[string]map[string]bool
	// applied: idempotency key → whether it made its effect; effects is
	// the receipt log, every effect in the order the agent applied it.
	applied map[string]bool
	effects []Apply
	// bkIDs: the event ids each business key reached the agent with.
	bkIDs map[string]map[string]bool
	calls int
	// poison: while set, events whose data says poison are refused with
	// a 422 (dead-lettered by the gateway, then redriven).
	poison atomic.Bool
	// down: until when the agent is in an outage.
	down atomic.Int64
	// w: the behaviours of the serve target's workloads (Retry-After
	// storms, a lying HEAD, dropped messages) and what they saw.
	w agentWorkloads
}

// agentEvent is what the agent (and the agent-ledger scenario's remote)
// reads of an event.
type agentEvent struct {
	Source        string          `json:"source"`
	ID            string          `json:"id"`
	PartitionKey  string          `json:"partitionkey"`
	ObjectVersion *int64          `json:"objectversion"`
	BusinessKey   string          `json:"businesskey"`
	Data          json.RawMessage `json:"data,omitempty"`
}

// apply is the entry of a history that applying ev makes.
func (ev agentEvent) apply() Apply {
	a := Apply{Source: ev.Source, ID: ev.ID, Key: ev.PartitionKey, BusinessKey: ev.BusinessKey}
	if ev.ObjectVersion != nil {
		a.Version, a.Versioned = *ev.ObjectVersion, true
	}
	return a
}

func startFaultyAgent(seed uint64) (*faultyAgent, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &faultyAgent{url: "http://" + ln.Addr().String(), r: rand.New(rand.NewPCG(seed, 7)),
		byKey: map[string]map[string]bool{}, payloads: map[string]map[string]bool{}, applied: map[string]bool{},
		bkIDs: map[string]map[string]bool{}}
	a.w.init()
	a.poison.Store(true)
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *faultyAgent) Close() error { return a.srv.Close() }

// outage makes the agent unavailable for d.
func (a *faultyAgent) outage(d time.Duration) { a.down.Store(time.Now().Add(d).UnixNano()) }

// fault is what one call suffers.
type agentFault int

const (
	callOK agentFault = iota
	call503
	call429
	callTooSlow
	callLostAnswer
	callSlow
)

func (a *faultyAgent) pick() agentFault {
	switch n := a.r.IntN(100); {
	case n < 8:
		return call503
	case n < 12:
		return call429
	case n < 14:
		return callTooSlow
	case n < 17:
		return callLostAnswer
	case n < 22:
		return callSlow
	}
	return callOK
}

func (a *faultyAgent) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		if a.lying() {
			return // the lie: HEAD 200 while every POST fails
		}
		if time.Now().UnixNano() < a.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		return
	}
	body, _ := io.ReadAll(r.Body)
	var ev agentEvent
	_ = json.Unmarshal(body, &ev)
	key := r.Header.Get("Idempotency-Key")
	sum := sha256.Sum256(body)
	arrived := a.arrived(ev)
	if a.lying() {
		a.mu.Lock()
		a.calls++
		add(a.byKey, ev.ID, key)
		add(a.payloads, ev.ID, hex.EncodeToString(sum[:8]))
		a.mu.Unlock()
		a.failedCall(ev.ID, "lie 503")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if time.Now().UnixNano() < a.down.Load() {
		a.failedCall(ev.ID, "outage")
		// Mid-deploy: half refused connections (reset), half 503.
		if a.r.IntN(2) == 0 {
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	a.mu.Lock()
	a.calls++
	add(a.byKey, ev.ID, key)
	add(a.payloads, ev.ID, hex.EncodeToString(sum[:8]))
	if ev.BusinessKey != "" {
		add(a.bkIDs, ev.BusinessKey, ev.ID)
	}
	f := a.pick()
	poisoned := a.poison.Load() && string(ev.Data) == `{"poison":true}`
	a.mu.Unlock()
	if a.dropped(w, ev) || a.storm(w, ev) {
		return
	}
	switch f {
	case call503:
		a.failedCall(ev.ID, "503")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case call429:
		a.failedCall(ev.ID, "429")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	case callTooSlow:
		// Longer than the gateway's agent timeout: the call is
		// uncertain, and may be applied or not (here: applied).
		time.Sleep(2500 * time.Millisecond)
		a.failedCall(ev.ID, "too slow")
	case callSlow:
		time.Sleep(time.Duration(50+a.r.IntN(200)) * time.Millisecond)
	}
	if poisoned {
		a.failedCall(ev.ID, "poison 422")
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"title":"poison event","status":422}`))
		return
	}
	a.mu.Lock()
	if !a.applied[key] {
		a.applied[key] = true
		a.effects = append(a.effects, ev.apply())
		if a.w.data[ev.ID] == "" {
			a.w.data[ev.ID] = string(ev.Data)
		}
	}
	if _, ok := a.w.answered[ev.ID]; !ok && f != callLostAnswer && f != callTooSlow {
		// Its 200 reaches the gateway (a too slow one arrives after the
		// gateway's timeout): the gateway knows the event applied.
		a.w.answered[ev.ID] = timedApply{key: ev.PartitionKey, arrived: arrived, at: time.Now()}
	}
	a.mu.Unlock()
	if f == callLostAnswer {
		a.failedCall(ev.ID, "answer lost")
		// Applied, but the answer never arrives: a reset connection.
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
	}
	w.WriteHeader(http.StatusOK)
}

func add(m map[string]map[string]bool, k, v string) {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	m[k][v] = true
}

// check is the oracle on the agent's side: per key, effects in version
// order; one Idempotency-Key per event; one payload per event; no
// business key reaching the agent under two events. It returns the
// effects by event id.
func (a *faultyAgent) check(res *Result) map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	last := map[string]int64{}
	byID := map[string]int{}
	for _, e := range a.effects {
		byID[e.ID]++
		if e.Key == "" || !e.Versioned {
			continue
		}
		if v, seen := last[e.Key]; seen && e.Version <= v {
			res.OrderViolations++
			res.fail("key %s: the agent applied version %d after %d", e.Key, e.Version, v)
		}
		last[e.Key] = e.Version
	}
	for _, id := range sortedKeys(a.byKey) {
		if n := len(a.byKey[id]); n > 1 {
			res.fail("event %s reached the agent under %d Idempotency-Keys", id, n)
		}
		if n := len(a.payloads[id]); n > 1 {
			res.fail("event %s reached the agent with %d different payloads (a collision got through)", id, n)
		}
	}
	for _, bk := range sortedKeys(a.bkIDs) {
		if n := len(a.bkIDs[bk]); n > 1 {
			res.fail("business key %s reached the agent under %d events", bk, n)
		}
	}
	for id, n := range byID {
		if n > 1 {
			res.DuplicateEffects += n - 1
			res.fail("event %s applied %d times at the agent", id, n)
		}
	}
	res.ActualEffects = len(a.effects)
	res.Deliveries = a.calls
	return byID
}

// history is the agent's receipt log: every effect, in the order the
// agent applied it.
func (a *faultyAgent) history() []Apply {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Apply(nil), a.effects...)
}

func sortedKeys(m map[string]map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (a *faultyAgent) String() string { return fmt.Sprintf("agent %s", a.url) }
