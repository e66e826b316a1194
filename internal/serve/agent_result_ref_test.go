package serve

import (
	"net/http"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// An agent names what its effect produced with the Seqbox-Result-Reference
// header of its 2xx answer; the gateway's inbox keeps it with the event's
// identity (seqbox inbox show). One the inbox cannot keep as text (too
// long, a control character) is left out: the event still applies.
func TestAgentNamesItsResultReference(t *testing.T) {
	agent := newFakeAgent(t, func(id string, _ int, w http.ResponseWriter) {
		switch id {
		case "named":
			w.Header().Set(HeaderResultReference, "task-9912")
		case "long":
			w.Header().Set(HeaderResultReference, strings.Repeat("x", 2000))
		}
		w.WriteHeader(http.StatusNoContent)
	})
	r := start(t, Options{AgentURL: agent.URL})
	for _, id := range []string{"named", "long", "plain"} {
		r.post(t, ev(id, "key-"+id, 1, ""))
	}
	eventually(t, "all applied", func() bool {
		return r.outcome(t, "named") == "applied" && r.outcome(t, "long") == "applied" && r.outcome(t, "plain") == "applied"
	})
	for id, want := range map[string]string{"named": "task-9912", "long": "", "plain": ""} {
		row, err := r.store.Executor().InboxGet(t.Context(), store.MessageRef{Consumer: r.opt.Consumer, Source: "crm", ID: id})
		require.NoError(t, err)
		require.Equal(t, want, row.ResultReference, id)
	}
	v := r.admin(t, "GET", "/v1/admin/inbox/crm/named", "", 200)
	require.Equal(t, "task-9912", v["result_reference"])
}
