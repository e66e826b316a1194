package serve

import (
	"net/http"
	"testing"
	"time"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

// A shutdown drains: the agent calls in flight finish (within
// ShutdownTimeout) and their results are recorded; no new call starts.
// Before, stopping cancelled every call in flight at once, left its
// ledger row uncertain though the agent applied it, and the event was
// sent again after the restart.
func TestShutdownLetsTheAgentCallsInFlightFinish(t *testing.T) {
	answering := make(chan struct{})
	release := make(chan struct{})
	agent := newFakeAgent(t, func(id string, _ int, w http.ResponseWriter) {
		if id == "slow" {
			close(answering)
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	})
	r := start(t, Options{AgentURL: agent.URL, ShutdownTimeout: time.Minute})
	r.post(t, ev("slow", "K", 1, ""))
	<-answering // the call is at the agent
	stopped := make(chan struct{})
	go func() {
		r.stop()
		close(stopped)
	}()
	eventually(t, "the drain started", func() bool { return r.disp.draining.Load() })
	close(release) // the agent answers while serve drains
	<-stopped
	st, err := sqlite.Open(t.Context(), r.opt.DB)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	ledger, err := effects.New(st, effects.Config{})
	require.NoError(t, err)
	rows, err := ledger.List(t.Context(), effects.Filter{Consumer: "gateway"})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, effects.Succeeded, rows[0].State, "the call that finished during the drain is recorded")
	require.Len(t, agent.snapshot(), 1)
}
