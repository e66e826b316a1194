package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

// ledgerState is the agent call's ledger state for event id ("" while
// there is no row).
func (r *running) ledgerState(t *testing.T, id string) effects.State {
	t.Helper()
	key := effects.Key(r.opt.Consumer, "crm", id, AgentAction)
	es, err := r.ledger.List(t.Context(), effects.Filter{Consumer: r.opt.Consumer, Limit: 1000})
	require.NoError(t, err)
	for _, e := range es {
		if e.IdempotencyKey == key {
			return e.State
		}
	}
	return ""
}

// A 429 or 503 with Retry-After: 60 for one event delays that event's key
// only: the event is retried after the delay (its key's successors wait
// behind it), while events of other keys go to the agent at once, and
// the circuit stays closed.
func TestAgentRetryAfterDelaysItsKeyOnly(t *testing.T) {
	for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			agent := newFakeAgent(t, func(id string, n int, w http.ResponseWriter) {
				if id == "a1" {
					w.Header().Set("Retry-After", "60")
					w.WriteHeader(code)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			r := start(t, Options{AgentURL: agent.URL, Policy: seqbox.Config{Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{
				InitialBackoff: 50 * time.Millisecond, MaxBackoff: 5 * time.Minute}}}})
			r.post(t, `{"specversion":"1.0","id":"a1","source":"crm","type":"t","partitionkey":"k1","objectversion":1}`)
			// a1's answer is recorded: whatever it did to the circuit is done.
			eventually(t, "a1's call recorded", func() bool {
				st := r.ledgerState(t, "a1")
				return st != "" && st != effects.Pending
			})
			r.post(t, `{"specversion":"1.0","id":"a2","source":"crm","type":"t","partitionkey":"k1","objectversion":2}`)
			r.post(t, `{"specversion":"1.0","id":"b1","source":"crm","type":"t","partitionkey":"k2","objectversion":1}`)
			eventually(t, "b1 (another key) applied without waiting for a1's Retry-After", func() bool { return r.outcome(t, "b1") == "applied" })
			open, _ := r.circuit.state()
			require.False(t, open, "one event's Retry-After opened the circuit for every key")
			var a1, a2 int
			for _, c := range agent.snapshot() {
				switch c.ID {
				case "a1":
					a1++
				case "a2":
					a2++
				}
			}
			require.Equal(t, 1, a1, "a1 is retried only after its Retry-After")
			require.Zero(t, a2, "a1's successor waits behind it")
			require.NotEqual(t, "applied", r.outcome(t, "a1"))
		})
	}
}

// An agent that answers HEAD 200 but POST 503 does not close the circuit:
// after each pause exactly one real call goes as the trial (after its
// probe), and its failure opens the circuit again; the other dispatches
// keep waiting. Once the agent answers POSTs again, a trial closes it and
// everything is applied, nothing dead-lettered.
func TestAgentProbeThatLiesClosesNothing(t *testing.T) {
	var lying atomic.Bool
	lying.Store(true)
	var mu sync.Mutex
	var methods []string // the requests the agent got, in order
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		methods = append(methods, r.Method)
		mu.Unlock()
		if r.Method == http.MethodPost && lying.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(agent.Close)
	since := func() []string {
		mu.Lock()
		defer mu.Unlock()
		for i, m := range methods {
			if m == http.MethodHead {
				return append([]string(nil), methods[i:]...)
			}
		}
		return nil
	}
	r := start(t, Options{AgentURL: agent.URL, Policy: policyWithAttempts(50)})
	const n = 8
	for i := range n {
		r.post(t, fmt.Sprintf(`{"specversion":"1.0","id":"l%d","source":"crm","type":"t","partitionkey":"k%d","objectversion":%d}`, i, i%4, i/4+1))
	}
	eventually(t, "three trials after the circuit opened", func() bool { return strings.Count(strings.Join(since(), " "), "POST") >= 3 })
	seq := since()
	for i, m := range seq {
		if m == http.MethodPost {
			require.Equal(t, http.MethodHead, seq[i-1], "a POST went without its own trial while the circuit was open: %v", seq)
		}
	}
	lying.Store(false)
	eventually(t, "all applied", func() bool {
		for i := range n {
			if r.outcome(t, fmt.Sprintf("l%d", i)) != "applied" {
				return false
			}
		}
		return true
	})
	require.Empty(t, list(t, r.admin(t, "GET", "/v1/admin/dlq", "", http.StatusOK), "dead_letters"))
	open, _ := r.circuit.state()
	require.False(t, open)
}

// A 503 or a 429 says the agent did not process the event: when the event
// is dead-lettered after them, its ledger row says failed, not uncertain
// (nobody has to reconcile a call that took no effect).
func TestAgentNotProcessedLeavesNoUncertainRow(t *testing.T) {
	agent := newFakeAgent(t, func(id string, n int, w http.ResponseWriter) {
		if id == "n1" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusTooManyRequests)
	})
	r := start(t, Options{AgentURL: agent.URL, Policy: policyWithAttempts(2)})
	r.post(t, `{"specversion":"1.0","id":"n1","source":"crm","type":"t","partitionkey":"k1","objectversion":1}`)
	r.post(t, `{"specversion":"1.0","id":"n2","source":"crm","type":"t","partitionkey":"k2","objectversion":1}`)
	eventually(t, "both dead-lettered", func() bool {
		return r.outcome(t, "n1") == "dead_lettered" && r.outcome(t, "n2") == "dead_lettered"
	})
	require.Equal(t, effects.Failed, r.ledgerState(t, "n1"), "a 503 left the call uncertain")
	require.Equal(t, effects.Failed, r.ledgerState(t, "n2"), "a 429 left the call uncertain")
}

// A call that never left the process (here net/http refuses a header
// value with a line break before dialling) is not uncertain in the
// ledger, is a definite failure (it can never be sent), reaches no agent
// and does not count against the circuit.
func TestAgentCallThatNeverLeftIsNotUncertain(t *testing.T) {
	agent := newFakeAgent(t, nil)
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	l, err := effects.New(st, effects.Config{})
	require.NoError(t, err)
	a := &dispatcher{url: agent.URL, consumer: "gw", client: newAgentClient(5*time.Second, 1), now: time.Now,
		metrics: newGatewayMetrics(prometheus.NewRegistry()), ledger: l, tokens: &tokens{key: make([]byte, 32)}}
	a.circuit = newCircuit(time.Now, a.probe, nil)
	raw := []byte(`{"specversion":"1.0","id":"h1","source":"crm","type":"t","partitionkey":"k\n1"}`)
	ev := seqboxtype.Event{Source: "crm", ID: "h1", PartitionKey: "k\n1", Raw: raw}
	id := seqboxtype.Identity{Consumer: "gw", Source: "crm", ID: "h1"}
	for range circuitThreshold {
		_, err = l.DoFor(context.Background(), id, AgentAction, func(ctx context.Context, key string) (string, error) {
			v, err := a.call(ctx, ev, key)
			b, _ := json.Marshal(v)
			return string(b), err
		})
		require.Error(t, err)
		var unc *effects.UncertainError
		require.False(t, errors.As(err, &unc), "a call that never left is not uncertain: %v", err)
		require.True(t, effects.IsDefinite(err), "%v", err)
	}
	es, err := l.List(context.Background(), effects.Filter{})
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, effects.Failed, es[0].State)
	require.Empty(t, agent.snapshot())
	open, _ := a.circuit.state()
	require.False(t, open, "calls that never left opened the circuit")
	require.Zero(t, a.circuit.failures)
}

// A Retry-After holds its own key only, whenever another key's events
// become ready: a1 (key k1) and b1..b3 (key k2) come in one ingest batch;
// a1 is refused with Retry-After: 60 while b1's call is on its way (the
// agent answers b1 only once it has refused a1), and b1's successors,
// received only after b1 is acknowledged, become ready during a1's wait.
// They reach the agent before a1 comes back. Signals only: a gateway that
// waited out a1's Retry-After anywhere (its batch, its key's slot in the
// scheduler, a decide slot, the circuit) would call a1 again first, a
// minute later, and b3 after it.
func TestAgentRetryAfterHoldsNoOtherKeysReadyEvent(t *testing.T) {
	refused, again, b3 := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	calls := map[string]int{}
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var e struct{ ID string }
		_ = json.Unmarshal(body, &e)
		if r.Method != http.MethodPost {
			return
		}
		mu.Lock()
		n := calls[e.ID]
		calls[e.ID]++
		mu.Unlock()
		switch {
		case e.ID == "a1" && n == 0:
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(http.StatusTooManyRequests)
			close(refused)
			return
		case e.ID == "a1" && n == 1:
			close(again)
		case e.ID == "b1":
			select {
			case <-refused:
			case <-r.Context().Done():
				return
			}
		case e.ID == "b3" && n == 0:
			close(b3)
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(agent.Close)
	r := start(t, Options{AgentURL: agent.URL, Policy: seqbox.Config{Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{
		InitialBackoff: 50 * time.Millisecond, MaxBackoff: 5 * time.Minute}}}})
	batch := `[` +
		`{"specversion":"1.0","id":"a1","source":"crm","type":"t","partitionkey":"k1","objectversion":1},` +
		`{"specversion":"1.0","id":"b1","source":"crm","type":"t","partitionkey":"k2","objectversion":1},` +
		`{"specversion":"1.0","id":"b2","source":"crm","type":"t","partitionkey":"k2","objectversion":2},` +
		`{"specversion":"1.0","id":"b3","source":"crm","type":"t","partitionkey":"k2","objectversion":3}]`
	code, body, _ := r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaBatch}, batch)
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	select {
	case <-b3:
	case <-again:
		t.Fatal("a1 was called again before b3, its key's successors ready all through a1's Retry-After: the refusal held another key")
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, calls["a1"], "a1 is called again only after its Retry-After")
	open, _ := r.circuit.state()
	require.False(t, open, "a 429 opened the circuit")
}
