package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/stretchr/testify/require"
)

// What each agent answer tells the circuit (docs/design.md §10.3): an
// answer that shows the agent processes calls (2xx, 409, 3xx, another
// 4xx) is a success, which resets the count of failures in a row and,
// as the half-open circuit's trial, closes it; 408 and 429 count neither
// way, and a trial that gets one hands its turn to the next waiter at
// once; a 5xx is a down agent's failure. Each answer comes from a real
// agent on loopback through the dispatcher's call, and the circuit's
// clock is moved by hand.
func TestEachAgentAnswerTellsTheCircuitWhatItShows(t *testing.T) {
	var status atomic.Int64
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := int(status.Load())
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(agent.Close)
	const (
		up      = "up"      // a success
		neither = "neither" // no news of the agent's health
		down    = "down"    // a down agent's failure
	)
	for _, tc := range []struct {
		code  int
		shows string
	}{
		{http.StatusOK, up}, {http.StatusFound, up}, {http.StatusTemporaryRedirect, up}, {http.StatusConflict, up},
		{http.StatusNotFound, up}, {http.StatusUnprocessableEntity, up},
		{http.StatusTooManyRequests, neither}, {http.StatusRequestTimeout, neither},
		{http.StatusInternalServerError, down}, {http.StatusServiceUnavailable, down},
	} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			var clock atomic.Int64
			clock.Store(time.Now().UnixMicro())
			now := func() time.Time { return time.UnixMicro(clock.Load()) }
			a := &dispatcher{url: agent.URL, consumer: "gw", client: newAgentClient(5*time.Second, 1), now: time.Now,
				metrics: newGatewayMetrics(prometheus.NewRegistry()), tokens: &tokens{key: make([]byte, 32)}}
			a.circuit = newCircuit(now, nil, nil)
			ev := seqboxtype.Event{Source: "crm", ID: "c1", Raw: []byte(`{"specversion":"1.0","id":"c1","source":"crm","type":"t"}`)}
			fail := func(n int) {
				for range n {
					p, err := a.circuit.wait(t.Context())
					require.NoError(t, err)
					p.failure("connection refused")
				}
			}
			dispatch := func() {
				p, err := a.circuit.wait(t.Context())
				require.NoError(t, err)
				defer p.release()
				status.Store(int64(tc.code))
				_, _ = a.call(context.WithValue(t.Context(), passKey{}, p), ev, "sbx-1")
			}
			isOpen := func() bool { open, _ := a.circuit.state(); return open }

			// Closed: two failures in a row, then this answer.
			fail(circuitThreshold - 1)
			dispatch()
			switch tc.shows {
			case up:
				for range circuitThreshold - 1 {
					require.False(t, isOpen(), "a %d did not start the count of failures in a row again", tc.code)
					fail(1)
				}
				require.False(t, isOpen(), "a %d did not start the count of failures in a row again", tc.code)
			case neither:
				require.False(t, isOpen(), "a %d counted as a down agent's failure", tc.code)
				fail(1)
				require.True(t, isOpen(), "a %d reset the count of failures in a row", tc.code)
			case down:
				require.True(t, isOpen(), "a %d is a down agent's failure", tc.code)
			}

			// Open, past its pause: this answer is the trial's.
			for !isOpen() {
				fail(1)
			}
			require.True(t, isOpen())
			clock.Add(circuitMaxPause.Microseconds())
			dispatch()
			switch tc.shows {
			case up:
				require.False(t, isOpen(), "the trial's %d shows the agent processes calls: it closes the circuit", tc.code)
			case neither:
				require.True(t, isOpen(), "the trial's %d closed the circuit", tc.code)
				a.circuit.mu.Lock()
				trialOut := a.circuit.trial
				a.circuit.mu.Unlock()
				require.False(t, trialOut, "the trial's %d kept the trial's turn from the next waiter", tc.code)
				p, err := a.circuit.wait(t.Context()) // the circuit's clock has not moved
				require.NoError(t, err)
				require.True(t, p.trial, "the next waiter goes as the trial at once")
				p.release()
			case down:
				open, until := a.circuit.state()
				require.True(t, open)
				require.Equal(t, 2*circuitMinPause, until.Sub(now()), "the trial's %d opens the circuit for a longer pause", tc.code)
			}
		})
	}
}

// answering is an agent on loopback that answers every request (POST and
// HEAD) with the status in code, and Retry-After: 7.
func answering(t *testing.T) (url string, code *atomic.Int64) {
	code = new(atomic.Int64)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(int(code.Load()))
	}))
	t.Cleanup(agent.Close)
	return agent.URL, code
}

// testDispatcher is a dispatcher of url with a closed circuit, and no
// ledger: its call, probe and reconcile are tested directly.
func testDispatcher(url string) *dispatcher {
	a := &dispatcher{url: url, consumer: "gw", client: newAgentClient(5*time.Second, 1), now: time.Now,
		metrics: newGatewayMetrics(prometheus.NewRegistry()), tokens: &tokens{key: make([]byte, 32)}}
	a.circuit = newCircuit(time.Now, nil, nil)
	return a
}

// The agent's Retry-After is kept on every transient answer, 408, 429 and
// 5xx, a 503 and a 500 included (docs/design.md §10.3: Retry-After is
// honoured for its event's key); 408, 429 and 503 say the event was not
// processed (failed in the ledger), another 5xx may have processed it
// (uncertain).
func TestAgentRetryAfterIsKeptOnEveryTransientAnswer(t *testing.T) {
	url, code := answering(t)
	a := testDispatcher(url)
	ev := seqboxtype.Event{Source: "crm", ID: "r1", Raw: []byte(`{"specversion":"1.0","id":"r1","source":"crm","type":"t"}`)}
	for _, tc := range []struct {
		code       int
		notApplied bool
	}{
		{http.StatusTooManyRequests, true}, {http.StatusRequestTimeout, true},
		{http.StatusServiceUnavailable, true}, {http.StatusInternalServerError, false}, {http.StatusBadGateway, false},
	} {
		code.Store(int64(tc.code))
		_, err := a.call(t.Context(), ev, "sbx-1")
		require.Error(t, err, "%d", tc.code)
		require.False(t, effects.IsDefinite(err), "%d: %v", tc.code, err)
		require.Equal(t, tc.notApplied, effects.IsNotApplied(err), "%d: %v", tc.code, err)
		after, ok := seqbox.RetryAfterOf(err)
		require.True(t, ok, "the agent's Retry-After on a %d was dropped: %v", tc.code, err)
		require.Equal(t, 7*time.Second, after, "%d", tc.code)
	}
}

// Reconciling an uncertain agent call sends the event again under its
// key (the agent deduplicates by it): a 2xx or a 409 says the first call
// took effect; a refusal (another 4xx) says it did not, so the ledger may
// let the next call go (Applied false, no error); anything else (a 5xx)
// leaves it uncertain.
func TestAgentReconciliationReadsTheAnswerAgain(t *testing.T) {
	url, code := answering(t)
	a := testDispatcher(url)
	ev := seqboxtype.Event{Source: "crm", ID: "u1", Raw: []byte(`{"specversion":"1.0","id":"u1","source":"crm","type":"t"}`)}
	ctx := context.WithValue(t.Context(), eventKey{}, ev)
	e := effects.Effect{IdempotencyKey: "sbx-1"}
	for _, tc := range []struct {
		code    int
		applied bool
		err     bool
	}{
		{http.StatusOK, true, false}, {http.StatusConflict, true, false},
		{http.StatusUnprocessableEntity, false, false}, {http.StatusBadRequest, false, false},
		{http.StatusInternalServerError, false, true},
	} {
		code.Store(int64(tc.code))
		r, err := a.reconcile(ctx, e)
		require.Equal(t, tc.err, err != nil, "%d: %v", tc.code, err)
		require.Equal(t, tc.applied, r.Applied, "%d", tc.code)
	}
}

// The half-open circuit's probe fails on what a proxy in front of a
// restarting agent answers, 502, 503 and 504, so that no message's
// attempt is spent on a trial meanwhile; any other answer comes from a
// live agent and passes.
func TestAgentProbeFailsOnAProxysAnswers(t *testing.T) {
	url, code := answering(t)
	a := testDispatcher(url)
	for c, fails := range map[int]bool{
		http.StatusBadGateway: true, http.StatusServiceUnavailable: true, http.StatusGatewayTimeout: true,
		http.StatusOK: false, http.StatusNotImplemented: false, http.StatusMethodNotAllowed: false, http.StatusInternalServerError: false,
	} {
		code.Store(int64(c))
		err := a.probe(t.Context())
		require.Equal(t, fails, err != nil, "probe answered %d: %v", c, err)
	}
}
