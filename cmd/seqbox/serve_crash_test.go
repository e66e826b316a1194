package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// Every event answered 202 is applied exactly once even when serve is
// killed with SIGKILL in the middle of a load: the load stops, serve
// restarts on the same database, and the record handler's effects are
// counted per event.
func TestServeKill9DuringLoadAppliesEvery202ExactlyOnce(t *testing.T) {
	db := filepath.Join(t.TempDir(), "seqbox.db")
	s := startServe(t, nil, "--db", db, "--admin-token", serveToken, "--lease", "2s")
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer client.Transport.(*http.Transport).CloseIdleConnections()

	var mu sync.Mutex
	accepted := map[string]bool{}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for n := 1; ; n++ {
				// Each poster owns its keys, so a key's versions are sent in order.
				id := fmt.Sprintf("g%d-%d", g, n)
				key := fmt.Sprintf("K%d-%d", g, n%5)
				body := `{"specversion":"1.0","id":"` + id + `","source":"crm","type":"t","partitionkey":"` + key +
					`","objectversion":` + fmt.Sprint((n+4)/5) + `}`
				resp, err := client.Post(s.url+"/v1/events", "application/cloudevents+json", strings.NewReader(body))
				if err != nil {
					return // the server is gone
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					mu.Lock()
					accepted[id] = true
					mu.Unlock()
				}
			}
		})
	}
	// SIGKILL in the middle of the load: once 200 events were accepted,
	// with the posters still posting.
	waitfor.That(t, 2*time.Minute, "200 accepted events", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted) >= 200
	})
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGKILL))
	wg.Wait()
	<-s.done
	require.NotEmpty(t, accepted)

	s2 := startServe(t, nil, "--db", db, "--admin-token", serveToken, "--lease", "2s")
	st, err := dbopen.StoreAccess(context.Background(), db, store.ReadOnly)
	require.NoError(t, err)
	defer st.Close()
	counts := func() map[string]int {
		rows, err := st.DB().Query(`SELECT id, COUNT(*) FROM seqbox_record_effects GROUP BY id`)
		require.NoError(t, err)
		defer rows.Close()
		m := map[string]int{}
		for rows.Next() {
			var id string
			var n int
			require.NoError(t, rows.Scan(&id, &n))
			m[id] = n
		}
		require.NoError(t, rows.Err())
		return m
	}
	waitUntil(t, "every accepted event applied", func() bool {
		c := counts()
		for id := range accepted {
			if c[id] == 0 {
				return false
			}
		}
		return true
	})
	for id, n := range counts() {
		require.Equal(t, 1, n, "event %s applied %d times", id, n)
	}
	t.Logf("%d events answered 202 before the kill; each applied once", len(accepted))
	require.Equal(t, 0, s2.stop(t, syscall.SIGTERM), s2.stderrText())
}
