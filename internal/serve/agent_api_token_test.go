package serve

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// The token opens the steps and effects of its own event only, only
// while the event's outcome is not final, and nothing answers without
// it; a refused request writes nothing. The identity in the path may
// hold any character (a source with slashes).
func TestAgentTokenRefusedElsewhere(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			const source = "https://crm.example/eu west"
			tokens := make(chan string, 4)
			a := newAPIAgent(t, func(c *apiCall, w http.ResponseWriter) {
				c.do("step", "plan", `{}`) // its own event's: granted
				tokens <- c.Token
				w.WriteHeader(http.StatusOK)
			})
			r := a.startWith(t, db(t))
			r.post(t, `{"specversion":"1.0","id":"a1","source":"`+source+`","type":"t","partitionkey":"K","objectversion":1}`)
			tokenA := <-tokens
			require.True(t, strings.HasPrefix(tokenA, "v1."), tokenA)

			refused := func(token, id string, want int, wantType string) {
				t.Helper()
				code, body := apiDo(t, r.url, token, apiPath(source, id, "effect", "refund"), `{"op":"begin"}`)
				require.Equal(t, want, code, "%v", body)
				require.Equal(t, wantType, body["type"])
				require.NotEmpty(t, body["detail"])
			}
			// The next event of the key reaches the agent only once a1's
			// outcome is final: its token is then closed.
			r.post(t, `{"specversion":"1.0","id":"a2","source":"`+source+`","type":"t","partitionkey":"K","objectversion":2}`)
			<-tokens
			refused("", "a1", http.StatusUnauthorized, ProblemUnauthorized)
			refused(tokenA, "a2", http.StatusForbidden, ProblemForbidden)
			refused(tokenA+"x", "a1", http.StatusForbidden, ProblemForbidden)
			refused("v1.abc.def", "a1", http.StatusForbidden, ProblemForbidden)
			eventually(t, "a1 applied", func() bool {
				seen, err := r.store.Executor().InboxSeen(t.Context(), store.MessageRef{Consumer: "gateway", Source: source, ID: "a1"})
				return err == nil && seen.Outcome == "applied"
			})
			refused(tokenA, "a1", http.StatusGone, ProblemEventFinal)
			for _, id := range []string{"a1", "a2"} {
				_, err := r.ledger.Get(t.Context(), effects.Key("gateway", source, id, "refund"))
				require.Error(t, err, "a refused request wrote no row")
			}
			_, err := r.ledger.Get(t.Context(), effects.Key("gateway", source, "a1", "step:plan"))
			require.NoError(t, err, "the event's own step was recorded")
		})
	}
}

// While an event's step is leased (its agent still thinking), the next
// event of its key does not reach the agent; another key's does. Once
// the step is recorded and the event applied, the next one follows.
func TestAgentOrderPerKeyWhileStepLeased(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			leased, release := make(chan struct{}), make(chan struct{})
			otherKey := make(chan struct{})
			a := newAPIAgent(t, func(c *apiCall, w http.ResponseWriter) {
				switch c.ID {
				case "k1":
					c.step("think", func() string {
						close(leased)
						<-release
						return "done"
					})
				case "l1":
					close(otherKey)
				}
				w.WriteHeader(http.StatusOK)
			})
			r := a.startWith(t, db(t))
			r.post(t, ev("k1", "K", 1, ""))
			<-leased
			r.post(t, ev("k2", "K", 2, ""))
			r.post(t, ev("l1", "L", 1, ""))
			<-otherKey
			require.NotContains(t, a.calls(), "k2", "k2 reached the agent while k1's step was leased")
			close(release)
			eventually(t, "k2 applied", func() bool { return r.outcome(t, "k2") == "applied" })
			calls := a.calls()
			require.Less(t, slices.Index(calls, "k1"), slices.Index(calls, "k2"))
			require.Equal(t, "applied", r.outcome(t, "k1"))
		})
	}
}

// Bad input gets a problem naming what is wrong, and leaves the row as
// it was: a bad name, bad JSON, an unknown op or member, a result over
// the bound, a record by a call that does not hold the row.
func TestAgentAPIBadInput(t *testing.T) {
	checked := make(chan struct{})
	a := newAPIAgent(t, func(c *apiCall, w http.ResponseWriter) {
		if b := c.do("step", "plan", `{}`); b["granted"] != true {
			t.Errorf("not granted: %v", b)
		}
		for _, x := range []struct {
			kind, name, body string
			want             int
			field            string
		}{
			{"step", "-plan", `{}`, 400, "step"},
			{"effect", "agent", `{}`, 400, "effect"},
			{"effect", strings.Repeat("x", 65), `{}`, 400, "effect"},
			{"step", "plan", `{"op":`, 400, "body"},
			{"step", "plan", `{"op":"begin"} {}`, 400, "body"},
			{"step", "plan", `{"op":"jump"}`, 400, "op"},
			{"step", "plan", `{"op":"begin","extra":1}`, 400, "body"},
			{"step", "plan", `{"op":"record","call":1,"state":"succeeded"}`, 400, "result"},
			{"step", "plan", `{"op":"record","call":1,"state":"uncertain","error":"x"}`, 400, "state"},
			{"step", "plan", `{"op":"reconcile","applied":true}`, 400, "op"},
			{"effect", "refund", `{"op":"record","call":0,"state":"succeeded"}`, 400, "call"},
			{"step", "plan", `{"op":"record","call":1,"state":"succeeded","result":"` + strings.Repeat("x", maxStepResult) + `"}`, 413, "result"},
			{"step", "plan", `{"op":"record","call":2,"state":"succeeded","result":1}`, 409, "call"},
		} {
			code, body := apiDo(t, c.gateway, c.Token, apiPath(c.Source, c.ID, x.kind, x.name), x.body)
			if code != x.want || body["field"] != x.field || body["detail"] == "" {
				t.Errorf("%s %s %.60s: %d %v, want %d naming %s", x.kind, x.name, x.body, code, body, x.want, x.field)
			}
		}
		still := c.do("step", "plan", `{"op":"heartbeat","call":1}`)
		if still["state"] != "pending" || still["call"] != float64(1) {
			t.Errorf("the refused requests changed the row: %v", still)
		}
		c.do("step", "plan", `{"op":"record","call":1,"state":"succeeded","result":{"ok":true}}`)
		close(checked)
		w.WriteHeader(http.StatusOK)
	})
	r := a.startWith(t, "")
	r.post(t, ev("b1", "K", 1, ""))
	<-checked
	eventually(t, "b1 applied", func() bool { return r.outcome(t, "b1") == "applied" })
	e, err := r.ledger.Get(t.Context(), effects.Key("gateway", "crm", "b1", "step:plan"))
	require.NoError(t, err)
	require.Equal(t, `{"ok":true}`, e.Ref)
}

// A step whose agent died is resolved by an operator (the dashboard's
// effects view, the admin API) like any ledger row; the next call gets
// the operator's reference as the step's result, JSON or not.
func TestAgentStepResolvedByOperator(t *testing.T) {
	results := make(chan any, 1)
	a := newAPIAgent(t, func(c *apiCall, w http.ResponseWriter) {
		b := c.do("step", "plan", `{}`)
		if b["state"] == "succeeded" {
			results <- b["result"]
			w.WriteHeader(http.StatusOK)
			return
		}
		// Granted (then "dead": no record, no heartbeat), or waiting.
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"type":"` + ProblemAgentWaits + `","status":503,"step":"plan"}`))
	})
	r := a.startWith(t, "")
	r.post(t, ev("o1", "K", 1, ""))
	key := effects.Key("gateway", "crm", "o1", "step:plan")
	eventually(t, "the dead agent's step uncertain", func() bool {
		e, err := r.ledger.Get(t.Context(), key)
		return err == nil && e.State == effects.Uncertain
	})
	// The gateway calls the agent again every Retry-After: a resolution
	// that comes while it does is refused (409, the decider reconciles
	// the call itself), and the operator tries again.
	eventually(t, "the resolution taken", func() bool {
		code, m, _ := r.call(t, "POST", "/v1/admin/effects/"+key+"/resolve", testToken, map[string]string{"Content-Type": "application/json"},
			`{"state":"succeeded","ref":"refund 20","by":"ops","reason":"asked the model by hand"}`)
		require.Contains(t, []int{200, 409}, code, "%v", m)
		return code == 200
	})
	require.Equal(t, "refund 20", <-results)
	eventually(t, "o1 applied", func() bool { return r.outcome(t, "o1") == "applied" })
}

// The token's key is kept in the database: a restarted gateway, or
// another serve process on the same database, issues and accepts the
// same token for the same event, on both stores.
func TestEffectsTokenSurvivesRestart(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			url := db(t)
			first := start(t, Options{DB: url})
			before := first.tokens.mint("gateway", "crm", "e1", "h")
			first.stop()
			second := start(t, Options{DB: url})
			require.Equal(t, before, second.tokens.mint("gateway", "crm", "e1", "h"))
			hash, err := second.tokens.check(before, "gateway", "crm", "e1")
			require.NoError(t, err)
			require.Equal(t, "h", hash)
		})
	}
}

// A token opens its own copy of an event only: the MAC covers the
// payload hash, and a request is served only while the event's turn is
// bound to that same hash. While e1 is being dispatched (its turn bound
// to its payload's hash), a token with a valid MAC for e1 but another
// payload hash (what a copy of e1 with another payload would carry;
// minted here with the gateway's own key) opens none of e1's steps or
// effects: it is 410 and writes nothing, while e1's own token, at the
// same moment, is served. Covers agentCall's check of the token's
// payload hash against the hash e1's turn is bound to (a token minted
// for another copy's payload, same id, was accepted).
func TestATokenForAnotherCopysPayloadIsRefused(t *testing.T) {
	for name, db := range storeURLs(t) {
		t.Run(name, func(t *testing.T) {
			dispatched, answer := make(chan *apiCall, 1), make(chan struct{})
			a := newAPIAgent(t, func(c *apiCall, w http.ResponseWriter) {
				dispatched <- c
				<-answer
				w.WriteHeader(http.StatusOK)
			})
			r := a.startWith(t, db(t))
			r.post(t, ev("e1", "K", 1, `{"amount":10}`))
			c := <-dispatched
			defer close(answer)

			own, err := r.tokens.check(c.Token, "gateway", c.Source, c.ID)
			require.NoError(t, err)
			other := strings.Repeat("0", len(own))
			require.NotEqual(t, own, other)
			foreign := r.tokens.mint("gateway", c.Source, c.ID, other)
			_, err = r.tokens.check(foreign, "gateway", c.Source, c.ID)
			require.NoError(t, err, "the foreign token's MAC is valid for e1: only its payload hash differs")

			code, body := apiDo(t, r.url, foreign, apiPath(c.Source, c.ID, "effect", "refund"), `{"op":"begin"}`)
			require.Equal(t, http.StatusGone, code, "a token minted for another copy's payload opened e1's effects: %v", body)
			require.Equal(t, ProblemEventFinal, body["type"])
			_, err = r.ledger.Get(t.Context(), effects.Key("gateway", c.Source, c.ID, "refund"))
			require.Error(t, err, "the refused request wrote no row")

			// e1 is being dispatched all the while: its own token is served.
			code, body = apiDo(t, r.url, c.Token, apiPath(c.Source, c.ID, "step", "plan"), `{}`)
			require.Equal(t, http.StatusOK, code, "%v", body)
			require.Equal(t, true, body["granted"], "%v", body)
		})
	}
}
