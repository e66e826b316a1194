package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// recordingAgent answers 200 to every event once up, and records when
// each event id first reached it with a 2xx.
type recordingAgent struct {
	*httptest.Server
	mu    sync.Mutex
	first map[string]time.Time
	// reached is closed and replaced whenever an event first reaches it.
	reachedOne chan struct{}
	down       atomic.Bool
	// hold, while open, keeps every call in flight (a model call running
	// when serve dies); closing it lets them answer.
	hold chan struct{}
}

func newRecordingAgent(t *testing.T) *recordingAgent {
	a := &recordingAgent{first: map[string]time.Time{}, reachedOne: make(chan struct{}), hold: make(chan struct{})}
	close(a.hold)
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var ev struct{ ID string }
		_ = json.Unmarshal(body, &ev)
		a.mu.Lock()
		hold := a.hold
		a.mu.Unlock()
		select {
		case <-hold:
		case <-r.Context().Done():
			return // the caller died
		}
		a.mu.Lock()
		if _, ok := a.first[ev.ID]; !ok && ev.ID != "" {
			a.first[ev.ID] = time.Now()
			close(a.reachedOne)
			a.reachedOne = make(chan struct{})
		}
		a.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(a.Close)
	return a
}

// holdCalls keeps the calls from now on in flight until release.
func (a *recordingAgent) holdCalls() (release func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan struct{})
	a.hold = ch
	return func() { close(ch) }
}

// reached returns when id first reached the agent, or a channel that is
// closed when the next event first reaches it.
func (a *recordingAgent) reached(id string) (time.Time, bool, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.first[id]
	return at, ok, a.reachedOne
}

// After a kill -9 of serve under load (default settings: lease, claim
// heartbeat, backoff), every accepted event reaches the agent within 30 s
// of the restart: a claim or a lease of the dead process holds nothing for
// DecideTimeout's two minutes. The test logs the longest wait.
func TestServeKill9UnderLoadEveryEventReachesTheAgentSoon(t *testing.T) {
	agent := newRecordingAgent(t)
	db := filepath.Join(t.TempDir(), "seqbox.db")
	s := startServe(t, nil, "--db", db, "--admin-token", serveToken, "--agent-url", agent.URL)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.Transport.(*http.Transport).CloseIdleConnections()
	var mu sync.Mutex
	var accepted []string
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for n := 1; n <= 60; n++ {
				id := fmt.Sprintf("g%d-%d", g, n)
				body := ce(id, fmt.Sprintf("K%d-%d", g, n%5), (n+4)/5, `{}`)
				resp, err := client.Post(s.url+"/v1/events", "application/cloudevents+json", strings.NewReader(body))
				if err != nil {
					return // the server is gone
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					mu.Lock()
					accepted = append(accepted, id)
					mu.Unlock()
				}
			}
		})
	}
	// Kill it once 40 events reached the agent, while calls are in
	// flight and more wait.
	for n := 0; n < 40; {
		agent.mu.Lock()
		n = len(agent.first)
		next := agent.reachedOne
		agent.mu.Unlock()
		if n < 40 {
			<-next
		}
	}
	release := agent.holdCalls()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGKILL))
	wg.Wait()
	<-s.done
	release()
	restart := time.Now()
	startServe(t, nil, "--db", db, "--admin-token", serveToken, "--agent-url", agent.URL)
	var longest time.Duration
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for _, id := range accepted {
		for {
			at, ok, next := agent.reached(id)
			if ok {
				longest = max(longest, at.Sub(restart))
				break
			}
			select {
			case <-next:
			case <-deadline.C:
				t.Fatalf("event %s did not reach the agent within 30 s of the restart", id)
			}
		}
	}
	t.Logf("%d accepted events; the longest wait after the restart was %s", len(accepted), longest.Round(time.Millisecond))
	// Nothing of it stale or left behind.
	st, err := dbopen.StoreAccess(context.Background(), db, store.ReadOnly)
	require.NoError(t, err)
	defer st.Close()
	waitUntil(t, "every accepted event applied", func() bool {
		var notApplied int
		require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_inbox WHERE source = 'crm' AND outcome <> 'applied'`).Scan(&notApplied))
		var n int
		require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_inbox WHERE source = 'crm'`).Scan(&n))
		return notApplied == 0 && n >= len(accepted) // an event whose 202 the kill cut off may be in too
	})
}

// A 15-second agent outage (a deploy's restart) under the default
// settings dead-letters nothing: the circuit pauses dispatch and probes.
func TestServeAgentOutageOf15sDeadLettersNothing(t *testing.T) {
	agent := newRecordingAgent(t)
	agent.down.Store(true)
	db := filepath.Join(t.TempDir(), "seqbox.db")
	s := startServe(t, nil, "--db", db, "--admin-token", serveToken, "--agent-url", agent.URL)
	down := time.Now()
	for i := range 40 {
		resp, err := http.Post(s.url+"/v1/events", "application/cloudevents+json", strings.NewReader(ce(fmt.Sprintf("o%d", i), fmt.Sprintf("k%d", i%8), i/8+1, `{}`)))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
	}
	// The outage lasts 15 s from its start: that is the scenario, not a
	// wait for something to happen.
	outage := time.NewTimer(15*time.Second - time.Since(down))
	<-outage.C
	agent.down.Store(false)
	st, err := dbopen.StoreAccess(context.Background(), db, store.ReadOnly)
	require.NoError(t, err)
	defer st.Close()
	waitUntil(t, "every event applied", func() bool {
		var applied int
		require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_inbox WHERE outcome = 'applied'`).Scan(&applied))
		return applied == 40
	})
	var dead int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_dlq`).Scan(&dead))
	require.Zero(t, dead, "the outage dead-lettered events")
	require.Contains(t, s.stderrText(), "agent circuit open", "the log says the circuit opened")
}
