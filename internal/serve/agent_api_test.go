package serve

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/seqbox/seqbox/effects"
	"github.com/stretchr/testify/require"
)

// apiCall is one call of an apiAgent: the event it carries and the way
// back to the gateway's agent API with its token.
type apiCall struct {
	t                      *testing.T
	gateway                string
	Source, ID, Key, Token string
	// N counts the calls of this event before this one.
	N int
}

// apiAgent is an agent on loopback whose answer is run's: it gets each
// call and answers with a status (and may use the agent API meanwhile).
type apiAgent struct {
	*httptest.Server
	gateway string
	mu      sync.Mutex
	seen    []string
	byID    map[string]int
	run     func(c *apiCall, w http.ResponseWriter)
}

func newAPIAgent(t *testing.T, run func(c *apiCall, w http.ResponseWriter)) *apiAgent {
	a := &apiAgent{run: run, byID: map[string]int{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var e struct{ ID, Source string }
		_ = json.Unmarshal(body, &e)
		a.mu.Lock()
		c := &apiCall{t: t, gateway: a.gateway, Source: e.Source, ID: e.ID, Key: r.Header.Get(HeaderPartitionKey),
			Token: r.Header.Get(HeaderEffectsToken), N: a.byID[e.ID]}
		a.byID[e.ID]++
		a.seen = append(a.seen, e.ID)
		a.mu.Unlock()
		a.run(c, w)
	}))
	t.Cleanup(a.Close)
	return a
}

// startWith starts a gateway in front of a on db.
func (a *apiAgent) startWith(t *testing.T, db string) *running {
	r := start(t, Options{DB: db, AgentURL: a.URL})
	a.mu.Lock()
	a.gateway = r.url
	a.mu.Unlock()
	return r
}

// calls lists the event ids the agent received, in order.
func (a *apiAgent) calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// apiPath is the agent API's path of a step or an effect of an event.
func apiPath(source, id, kind, name string) string {
	return "/v1/events/" + url.PathEscape(source) + "/" + url.PathEscape(id) + "/" + kind + "s/" + url.PathEscape(name)
}

// apiDo sends one request of the agent API (token "" sends none) and
// returns the status and the decoded body. It reports failures with
// t.Errorf, so that an agent's goroutine may use it.
func apiDo(t *testing.T, gateway, token, path, body string) (int, map[string]any) {
	req, err := http.NewRequest("POST", gateway+path, strings.NewReader(body))
	if err != nil {
		t.Errorf("request: %v", err)
		return 0, nil
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set(HeaderEffectsToken, token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return 0, nil
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Errorf("%s: the answer is not JSON: %v", path, err)
	}
	return resp.StatusCode, m
}

// do runs one operation on a step ("step") or an effect ("effect") of
// the call's event with its token, and requires a 200.
func (c *apiCall) do(kind, name, body string) map[string]any {
	code, m := apiDo(c.t, c.gateway, c.Token, apiPath(c.Source, c.ID, kind, name), body)
	if code != http.StatusOK {
		c.t.Errorf("%s %s %s: %d %v", kind, name, body, code, m)
	}
	return m
}

// step is the SDK's ctx.step in a few lines: the recorded result, or run
// and record it.
func (c *apiCall) step(name string, run func() string) string {
	b := c.do("step", name, `{}`)
	if b["state"] == "succeeded" {
		return b["result"].(string)
	}
	if b["granted"] != true {
		c.t.Errorf("step %s neither recorded nor granted: %v", name, b)
		return ""
	}
	res := run()
	c.do("step", name, fmt.Sprintf(`{"op":"record","call":%v,"state":"succeeded","result":%q}`, b["call"], res))
	return res
}

// remote is a remote side that applies each call it gets, keeping them
// by idempotency key, and answers a lookup by key.
type remote struct {
	mu    sync.Mutex
	calls map[string]int
}

func (r *remote) apply(key string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	r.calls[key]++
	return "ref-" + key[len(key)-6:]
}

func (r *remote) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[key]
}

// A step is memoised across a retried event: the agent answers 503 after
// recording it, and the retry reads the recorded result; the model is
// asked once.
func TestAgentStepMemoisedAcrossRetry(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			asked, results := 0, []string{}
			a := newAPIAgent(t, func(c *apiCall, w http.ResponseWriter) {
				res := c.step("plan", func() string {
					mu.Lock()
					defer mu.Unlock()
					asked++
					return fmt.Sprintf("refund 20 (answer %d)", asked)
				})
				mu.Lock()
				results = append(results, res)
				mu.Unlock()
				if c.N == 0 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			r := a.startWith(t, db(t))
			r.post(t, ev("s1", "K", 1, `{"order":1}`))
			eventually(t, "s1 applied", func() bool { return r.outcome(t, "s1") == "applied" })
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, 1, asked, "the model is asked once")
			require.Equal(t, []string{"refund 20 (answer 1)", "refund 20 (answer 1)"}, results)
			e, err := r.ledger.Get(t.Context(), effects.Key("gateway", "crm", "s1", "step:plan"))
			require.NoError(t, err)
			require.Equal(t, effects.Succeeded, e.State)
			require.Equal(t, `"refund 20 (answer 1)"`, e.Ref)
		})
	}
}

// A tool call is made once when the agent answers 503 after making it:
// the retry finds it succeeded, with its reference.
func TestAgentEffectOnceWhenAgentAnswers503(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			var rem remote
			refs := make(chan string, 2)
			a := newAPIAgent(t, func(c *apiCall, w http.ResponseWriter) {
				b := c.do("effect", "refund", `{"op":"begin"}`)
				ref, _ := b["ref"].(string)
				if b["granted"] == true {
					ref = rem.apply(b["idempotency_key"].(string))
					c.do("effect", "refund", fmt.Sprintf(`{"op":"record","call":%v,"state":"succeeded","ref":%q}`, b["call"], ref))
				}
				refs <- ref
				if c.N == 0 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			r := a.startWith(t, db(t))
			r.post(t, ev("t1", "K", 1, ""))
			eventually(t, "t1 applied", func() bool { return r.outcome(t, "t1") == "applied" })
			key := effects.Key("gateway", "crm", "t1", "refund")
			require.Equal(t, 1, rem.count(key), "the refund is made once")
			first, second := <-refs, <-refs
			require.Equal(t, first, second, "the retry gets the recorded reference")
			e, err := r.ledger.Get(t.Context(), key)
			require.NoError(t, err)
			require.Equal(t, effects.Succeeded, e.State)
			require.Equal(t, 1, e.Calls)
		})
	}
}

// A call whose agent died after the remote side applied it (no record,
// no heartbeat) turns uncertain once its lease runs out; meanwhile the
// retried event waits (agent-waits); then the agent's reconciliation
// finds it by key and the ledger records it succeeded, without a second
// call.
func TestAgentUncertainEffectReconciled(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			var rem remote
			var mu sync.Mutex
			var answers []string
			a := newAPIAgent(t, func(c *apiCall, w http.ResponseWriter) {
				b := c.do("effect", "refund", `{"op":"begin"}`)
				mu.Lock()
				answers = append(answers, fmt.Sprint(b["state"], "/", b["granted"]))
				mu.Unlock()
				key, _ := b["idempotency_key"].(string)
				switch {
				case b["granted"] == true:
					rem.apply(key)
					w.WriteHeader(http.StatusInternalServerError) // died before recording
				case b["state"] == "pending" || b["retry_after_ms"] != nil:
					w.Header().Set("Content-Type", "application/problem+json")
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(http.StatusServiceUnavailable)
					_, _ = fmt.Fprintf(w, `{"type":%q,"status":503,"effect":"refund"}`, ProblemAgentWaits)
				case b["state"] == "uncertain":
					applied := rem.count(key) > 0
					rb := c.do("effect", "refund", fmt.Sprintf(`{"op":"reconcile","applied":%v,"ref":"found-by-key"}`, applied))
					if rb["state"] != "succeeded" {
						w.WriteHeader(http.StatusServiceUnavailable)
						return
					}
					w.WriteHeader(http.StatusOK)
				default:
					w.WriteHeader(http.StatusOK)
				}
			})
			r := a.startWith(t, db(t))
			r.post(t, ev("u1", "K", 1, ""))
			eventually(t, "u1 applied", func() bool { return r.outcome(t, "u1") == "applied" })
			key := effects.Key("gateway", "crm", "u1", "refund")
			require.Equal(t, 1, rem.count(key), "never re-run blind")
			e, err := r.ledger.Get(t.Context(), key)
			require.NoError(t, err)
			require.Equal(t, effects.Succeeded, e.State)
			require.Equal(t, "found-by-key", e.Ref)
			require.NotNil(t, e.ReconciledAt)
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, "pending/true", answers[0])
			require.Contains(t, answers, "uncertain/false", "%v", answers)
		})
	}
}
