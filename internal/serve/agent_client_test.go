package serve

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The dispatcher keeps a connection open for each call that may be in
// flight: rounds of concurrent calls reuse them instead of dialling anew
// (with database/sql-style defaults of two idle connections, every call
// beyond two dialled and closed a connection of its own).
func TestAgentClientReusesAConnectionPerCallInFlight(t *testing.T) {
	const concurrency, rounds = 8, 4
	var dialled atomic.Int32
	inFlight := make(chan struct{}, concurrency)
	var round atomic.Pointer[chan struct{}]
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		all := round.Load()
		inFlight <- struct{}{}
		<-*all // every round's calls are in flight at once
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	client := newAgentClient(time.Minute, concurrency)
	for range rounds {
		all := make(chan struct{})
		round.Store(&all)
		var wg sync.WaitGroup
		for range concurrency {
			wg.Go(func() {
				resp, err := client.Post(srv.URL, "application/json", nil)
				require.NoError(t, err)
				resp.Body.Close()
			})
		}
		for range concurrency {
			<-inFlight
		}
		close(all)
		wg.Wait()
	}
	require.LessOrEqual(t, dialled.Load(), int32(concurrency), "connections dialled for %d rounds of %d calls", rounds, concurrency)
}
