package serve

import (
	"net/http"
	"testing"

	"github.com/seqbox/seqbox/effects"
	"github.com/stretchr/testify/require"
)

// A heartbeat renews a call's lease only while the row is that call's
// pending one (docs/agents.md): once the call is recorded, failed or
// succeeded, the row counts the same call but is no longer pending, and
// a heartbeat of it is a 409 naming the call, not a 200 that tells a
// caller still running its call that it holds the row.
func TestAgentHeartbeatOfARecordedCallIsRefused(t *testing.T) {
	checked := make(chan struct{})
	a := newAPIAgent(t, func(c *apiCall, w http.ResponseWriter) {
		defer w.WriteHeader(http.StatusOK)
		defer close(checked)
		heartbeatRefused := func(call int, state string) {
			code, body := apiDo(t, c.gateway, c.Token, apiPath(c.Source, c.ID, "step", "plan"),
				`{"op":"heartbeat","call":`+itoa(int64(call))+`}`)
			if code != http.StatusConflict || body["field"] != "call" {
				t.Errorf("heartbeat of call %d after it was recorded %s: %d %v, want 409 naming call", call, state, code, body)
			}
		}
		if b := c.do("step", "plan", `{}`); b["granted"] != true || b["call"] != float64(1) {
			t.Errorf("call 1 not granted: %v", b)
			return
		}
		c.do("step", "plan", `{"op":"record","call":1,"state":"failed","error":"the model timed out"}`)
		heartbeatRefused(1, "failed")
		if b := c.do("step", "plan", `{}`); b["granted"] != true || b["call"] != float64(2) {
			t.Errorf("call 2 not granted after a failed call: %v", b)
			return
		}
		c.do("step", "plan", `{"op":"record","call":2,"state":"succeeded","result":"refund 20"}`)
		heartbeatRefused(2, "succeeded")
	})
	r := a.startWith(t, "")
	r.post(t, ev("h1", "K", 1, ""))
	<-checked
	eventually(t, "h1 applied", func() bool { return r.outcome(t, "h1") == "applied" })
	e, err := r.ledger.Get(t.Context(), effects.Key("gateway", "crm", "h1", "step:plan"))
	require.NoError(t, err)
	require.Equal(t, effects.Succeeded, e.State)
	require.Equal(t, `"refund 20"`, e.Ref)
	require.Equal(t, 2, e.Calls)
}
