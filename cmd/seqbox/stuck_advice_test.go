package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A gateway's key whose first event retries holds its next event in the
// queue (the key's message group), not parked: the stuck list showed
// nothing of it, and its way out read "none". A key blocked behind a dead
// letter whose call is uncertain offered redrive and skip, which both
// fail until the call is resolved. And the API's advice named the
// server's own --db, a path the operator may not have.
func TestStuckKeysNameARetryingHeadAndAnOpenCall(t *testing.T) {
	s, db := stuckServer(t, "--retry-backoff", "4m", "--max-attempts", "5")
	s.event(t, ce("r1", "R", 1, `{"fail":"transient"}`))
	s.event(t, ce("r2", "R", 2, ""))
	key := func(name string) map[string]any {
		for _, k := range s.stuckKeys(t) {
			if k["partitionkey"] == name {
				return k
			}
		}
		return nil
	}
	waitUntil(t, "R listed as stuck", func() bool { return key("R") != nil })
	r := key("R")
	require.Equal(t, "retrying", r["status"], "%v", r)
	require.Equal(t, "r1", r["turn"].(map[string]any)["id"])
	require.Contains(t, r["next_action"], "seqbox keys release R --by WHO --reason WHY --server "+s.url, "%v", r)
	require.Equal(t, "release", r["actions"].([]any)[0].(map[string]any)["name"])
	out := ok(t, "keys", "list", "--db", db)
	require.Regexp(t, `(?m)^R\s+retrying\s`, out)

	// K is blocked behind k2's dead letter; a call of k2 is now uncertain.
	call := uncertainCallIn(t, db, "gateway", "k2")
	k := key("K")
	require.NotNil(t, k)
	open := k["blocked_by"].(map[string]any)["open_call"].(map[string]any)
	require.Equal(t, call, open["idempotency_key"])
	require.Equal(t, "uncertain", open["state"])
	require.Contains(t, k["next_action"], "resolve call "+call)
	require.Equal(t, []any{map[string]any{"name": "resolve", "method": "POST", "path": "/v1/admin/effects/" + call + "/resolve"}}, k["actions"])
	for _, out := range []string{ok(t, "keys", "list", "--db", db), ok(t, "keys", "list", "--server", s.url, "--admin-token", serveToken)} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "K ") {
				line = l
			}
		}
		require.Contains(t, line, "seqbox effects resolve "+call, out)
		require.NotContains(t, line, "# or: seqbox dlq skip", out)
	}

	// Resolved, the dead letter's redrive and skip are the way out again.
	s.admin(t, "POST", "/v1/admin/effects/"+call+"/resolve", `{"state":"failed","by":"ops","reason":"not in the CRM"}`, 200)
	k = key("K")
	require.Nil(t, k["blocked_by"].(map[string]any)["open_call"])
	require.Equal(t, "redrive", k["actions"].([]any)[0].(map[string]any)["name"])
}
