package serve

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// agentCall is one request the fake agent received.
type agentCall struct {
	ID, Key, Version, IdemKey, ContentType string
}

// fakeAgent answers by event id: a func of the event's id and how many
// calls that id had before.
type fakeAgent struct {
	*httptest.Server
	mu     sync.Mutex
	calls  []agentCall
	answer func(id string, n int, w http.ResponseWriter)
}

func newFakeAgent(t *testing.T, answer func(id string, n int, w http.ResponseWriter)) *fakeAgent {
	a := &fakeAgent{answer: answer}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var e struct{ ID string }
		_ = json.Unmarshal(body, &e)
		a.mu.Lock()
		n := 0
		for _, c := range a.calls {
			if c.ID == e.ID {
				n++
			}
		}
		a.calls = append(a.calls, agentCall{ID: e.ID, Key: r.Header.Get(HeaderPartitionKey), Version: r.Header.Get(HeaderObjectVersion),
			IdemKey: r.Header.Get(HeaderIdempotencyKey), ContentType: r.Header.Get("Content-Type")})
		a.mu.Unlock()
		if a.answer == nil {
			w.WriteHeader(http.StatusOK)
			return
		}
		a.answer(e.ID, n, w)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *fakeAgent) snapshot() []agentCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]agentCall(nil), a.calls...)
}

func (r *running) outcome(t *testing.T, id string) string {
	t.Helper()
	seen, err := r.store.Executor().InboxSeen(t.Context(), store.MessageRef{Consumer: r.opt.Consumer, Source: "crm", ID: id})
	if errors.Is(err, store.ErrNotFound) {
		return ""
	}
	require.NoError(t, err)
	return string(seen.Outcome)
}

// The agent gets each key's events one at a time, in version order, with
// the Idempotency-Key, partition key and version headers, even when they
// arrive in one batch and the agent is slow.
func TestAgentCalledInOrderPerKey(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			agent := newFakeAgent(t, func(id string, _ int, w http.ResponseWriter) {
				time.Sleep(time.Duration(len(id)%3) * 5 * time.Millisecond)
				w.WriteHeader(http.StatusNoContent)
			})
			r := start(t, Options{DB: db(t), AgentURL: agent.URL})
			batch := "["
			for v := 1; v <= 6; v++ {
				for _, k := range []string{"K", "L"} {
					if len(batch) > 1 {
						batch += ","
					}
					batch += ev(k+strconv.Itoa(v), k, v, `{"v":`+strconv.Itoa(v)+`}`)
				}
			}
			code, body, _ := r.call(t, "POST", "/v1/events", "", map[string]string{"Content-Type": mediaBatch}, batch+"]")
			require.Equal(t, 202, code, "%v", body)
			eventually(t, "12 applied", func() bool {
				return r.metricValue(t, `seqbox_deliveries_total{consumer="gateway",outcome="applied"}`) == 12
			})
			seen := map[string]int{}
			for _, c := range agent.snapshot() {
				v, _ := strconv.Atoi(c.Version)
				require.Equal(t, seen[c.Key]+1, v, "key %s called out of order: %+v", c.Key, agent.snapshot())
				seen[c.Key] = v
				require.Equal(t, effects.Key("gateway", "crm", c.ID, AgentAction), c.IdemKey)
				require.Equal(t, mediaStructured, c.ContentType)
			}
			require.Equal(t, map[string]int{"K": 6, "L": 6}, seen)
			require.EqualValues(t, 12, r.metricValue(t, `seqbox_gateway_agent_verdicts_total{consumer="gateway",verdict="applied"}`))
		})
	}
}

// The agent's answer decides the outcome: 409 stale (the event ends
// stale, its key moves on), 422 dead-lettered, 503 retried, a timeout
// retried under the same Idempotency-Key.
func TestAgentAnswersDecideTheOutcome(t *testing.T) {
	agent := newFakeAgent(t, func(id string, n int, w http.ResponseWriter) {
		switch {
		case id == "stale":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"type":"about:blank","title":"Conflict","outcome":"stale","detail":"we have v9"}`))
		case id == "bad":
			w.WriteHeader(http.StatusUnprocessableEntity)
		case id == "flaky" && n == 0:
			w.WriteHeader(http.StatusServiceUnavailable)
		case id == "slow" && n == 0:
			time.Sleep(700 * time.Millisecond)
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	r := start(t, Options{AgentURL: agent.URL, AgentTimeout: 300 * time.Millisecond})
	for _, id := range []string{"stale", "bad", "flaky", "slow"} {
		r.post(t, ev(id, "key-"+id, 1, ""))
	}
	eventually(t, "every event settled", func() bool {
		return r.outcome(t, "stale") == "stale" && r.outcome(t, "bad") == "dead_lettered" &&
			r.outcome(t, "flaky") == "applied" && r.outcome(t, "slow") == "applied"
	})
	calls := map[string][]string{}
	for _, c := range agent.snapshot() {
		calls[c.ID] = append(calls[c.ID], c.IdemKey)
	}
	require.Len(t, calls["stale"], 1, "a 409 is not retried")
	require.Len(t, calls["flaky"], 2, "a 5xx is retried")
	require.Equal(t, calls["flaky"][0], calls["flaky"][1], "under the same Idempotency-Key")
	require.Len(t, calls["slow"], 2, "a timeout is retried")
	require.Equal(t, calls["slow"][0], calls["slow"][1], "under the same Idempotency-Key")
	require.EqualValues(t, 1, r.metricValue(t, `seqbox_gateway_agent_verdicts_total{consumer="gateway",verdict="stale"}`))
	require.EqualValues(t, 1, r.metricValue(t, `seqbox_gateway_agent_calls_total{consumer="gateway",result="timeout"}`))
	audit := r.admin(t, "GET", "/v1/admin/audit?id=stale&source=crm", "", 200)
	require.Contains(t, *strPtr(list(t, audit, "identities")[0]["agent_verdict"]), `"verdict":"stale"`)
	keys := list(t, r.admin(t, "GET", "/v1/admin/keys", "", 200), "keys")
	require.Len(t, keys, 1)
	require.Equal(t, "key-bad", keys[0]["partitionkey"])
	rows, err := r.ledger.List(t.Context(), effects.Filter{Consumer: "gateway"})
	require.NoError(t, err)
	states := map[string]effects.State{}
	for _, x := range rows {
		states[x.ID] = x.State
	}
	require.Equal(t, effects.Succeeded, states["slow"], "the uncertain call was reconciled")
	require.Equal(t, effects.Failed, states["bad"])
}

func strPtr(v any) *string {
	s, _ := v.(string)
	return &s
}

// A gap holds the event without calling the agent; once the missing
// version arrives the agent gets both, in order. A dead-lettered event
// redriven after the agent is fixed applies, and its parked successor
// after it.
func TestAgentGapAndRedrive(t *testing.T) {
	var broken sync.Map
	broken.Store("r1", true)
	agent := newFakeAgent(t, func(id string, _ int, w http.ResponseWriter) {
		if _, ok := broken.Load(id); ok {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	r := start(t, Options{AgentURL: agent.URL})
	r.post(t, ev("g1", "G", 1, ""))
	eventually(t, "g1", func() bool { return r.outcome(t, "g1") == "applied" })
	r.post(t, ev("g3", "G", 3, ""))
	eventually(t, "g3 held", func() bool { return r.outcome(t, "g3") == "held" })
	r.post(t, ev("g2", "G", 2, ""))
	eventually(t, "g3 applied", func() bool { return r.outcome(t, "g3") == "applied" })
	var order []string
	for _, c := range agent.snapshot() {
		order = append(order, c.ID)
	}
	require.Equal(t, []string{"g1", "g2", "g3"}, order)

	seq := func() int64 {
		r.post(t, ev("r1", "R", 1, ""))
		r.post(t, ev("r2", "R", 2, ""))
		var seq int64
		eventually(t, "R blocked", func() bool {
			dls := list(t, r.admin(t, "GET", "/v1/admin/dlq", "", 200), "dead_letters")
			if len(dls) == 1 && r.outcome(t, "r2") == "blocked" {
				seq = int64(dls[0]["seq"].(float64))
				return true
			}
			return false
		})
		return seq
	}()
	broken.Delete("r1")
	res := r.admin(t, "POST", "/v1/admin/dlq/"+itoa(seq)+"/redrive", `{"by":"ops","reason":"agent fixed"}`, 200)
	var outs []string
	for _, d := range list(t, res, "results") {
		outs = append(outs, d["outcome"].(string))
	}
	require.Equal(t, []string{"applied", "applied"}, outs)
	require.Empty(t, list(t, r.admin(t, "GET", "/v1/admin/keys", "", 200), "keys"))
}

// An event whose business key was already applied, or that is past the
// business deadline, is decided without calling the agent.
func TestAgentNotCalledForSemanticDuplicatesOrExpired(t *testing.T) {
	agent := newFakeAgent(t, nil)
	r := start(t, Options{AgentURL: agent.URL, Policy: seqbox.Config{Policies: seqbox.Policies{MaxAge: time.Hour}}})
	r.post(t, `{"specversion":"1.0","id":"bk1","source":"crm","type":"t","businesskey":"followup:1"}`)
	eventually(t, "bk1", func() bool { return r.outcome(t, "bk1") == "applied" })
	r.post(t, `{"specversion":"1.0","id":"bk2","source":"crm","type":"t","businesskey":"followup:1"}`)
	r.post(t, `{"specversion":"1.0","id":"old","source":"crm","type":"t","time":"2020-01-01T00:00:00Z"}`)
	eventually(t, "bk2 and old", func() bool {
		return r.outcome(t, "bk2") == "semantic_duplicate" && r.outcome(t, "old") == "expired"
	})
	calls := agent.snapshot()
	require.Len(t, calls, 1, "%+v", calls)
	require.Equal(t, "bk1", calls[0].ID)
}
