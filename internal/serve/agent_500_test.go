package serve

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// lockedLog is a log sink the test reads while the server writes.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// An agent's 500 says nothing of whether it acted before failing: the
// call is uncertain, reconciled by sending it again under its
// Idempotency-Key, never recorded failed (which would let a new call go,
// and past the deadline end the event expired over an effect that took
// place). No test looked at the ledger's state after a 500: a planted
// bug that recorded it failed passed every suite (helper-31's M17).
func TestAnAgents500LeavesItsCallUncertain(t *testing.T) {
	var calls atomic.Int32
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "the agent applied it, then failed", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(agent.Close)
	logs := &lockedLog{}
	r := start(t, Options{AgentURL: agent.URL, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	r.post(t, ev("e1", "K", 1, `{}`))
	eventually(t, "e1 applied", func() bool { return r.outcome(t, "e1") == "applied" })
	out := logs.String()
	var retried string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "delivery failed; it will be retried") {
			retried = line
			break
		}
	}
	if !strings.Contains(retried, "is uncertain") {
		t.Fatalf("the 500's call was not recorded uncertain: %q; log:\n%s", retried, out)
	}
	if calls.Load() != 2 {
		t.Fatalf("the agent got %d requests, want 2 (the call, and its reconciliation)", calls.Load())
	}
}
