package main

// One JSON view per record: what --output json prints for a record
// through --db and through --server is byte for byte the same, and it is
// the admin API's view of that record, less what only the API adds (a
// key's age and its next action as API calls; a consumer's state in this
// server).

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// apiOnly are the members the admin API adds to a record's view, by
// record: they say what this server knows or offers, not what is
// recorded.
var apiOnly = map[string][]string{
	"key":      {"received", "age_seconds", "next_action", "actions"},
	"consumer": {"heartbeat_age_seconds", "served_here", "in_flight_agent_calls", "agent_concurrency", "circuit"},
	"action":   {"decisions"},
}

// byDesign are the members of an action's result that differ between two
// runs of one action: each run is its own request, taken by whoever runs
// it.
var byDesign = []string{"request", "taken_by"}

// canon is v as JSON with sorted members, without the members drop
// names; a string is read as JSON first.
func canon(t *testing.T, v any, drop ...string) string {
	t.Helper()
	if s, ok := v.(string); ok {
		require.NoError(t, json.Unmarshal([]byte(s), &v), s)
	}
	if m, ok := v.(map[string]any); ok {
		c := make(map[string]any, len(m))
		for k, x := range m {
			c[k] = x
		}
		for _, k := range drop {
			delete(c, k)
		}
		v = c
	}
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// jsonArray reads a JSON array of objects.
func jsonArray(t *testing.T, s string) []any {
	t.Helper()
	var out []any
	require.NoError(t, json.Unmarshal([]byte(s), &out), s)
	return out
}

func TestOneJSONViewPerRecord(t *testing.T) {
	s, db := stuckServer(t)
	// F is blocked by its first message: it has no version of its own.
	s.event(t, ce("f1", "F", 1, `{"fail":"permanent"}`))
	waitUntil(t, "F blocked", func() bool {
		for _, k := range s.stuckKeys(t) {
			if k["partitionkey"] == "F" && k["status"] == "blocked" {
				return true
			}
		}
		return false
	})
	effectKey := uncertainCallIn(t, db, "gateway", "evt-9")
	uncertainCallIn(t, db, "gateway", "evt-10")

	local := func(args ...string) string {
		t.Helper()
		return ok(t, append(args, "--db", db)...)
	}
	remote := func(args ...string) string {
		t.Helper()
		return ok(t, append(args, "--server", s.url, "--admin-token", serveToken)...)
	}
	// The advice printed next to a blocked key names the way it was read.
	retarget := func(out string) string {
		return strings.ReplaceAll(out, " --db "+db+" --consumer gateway", " --server "+s.url)
	}
	api := func(path string) map[string]any {
		t.Helper()
		return s.admin(t, "GET", path, "", 200)
	}

	t.Run("key report", func(t *testing.T) {
		for _, args := range [][]string{{"keys", "list", "-o", "json"}, {"keys", "list", "--all", "-o", "json"}} {
			l := local(args...)
			require.Equal(t, retarget(l), remote(args...), "seqbox %s", strings.Join(args, " "))
			byKey := map[any]any{}
			for _, k := range api("/v1/admin/keys" + allQuery(args))["keys"].([]any) {
				byKey[k.(map[string]any)["partitionkey"]] = k
			}
			rows := jsonArray(t, retarget(l)) // the API's advice names the server it was read from
			require.Len(t, rows, len(byKey))
			for _, row := range rows {
				k := row.(map[string]any)["partitionkey"]
				require.Equal(t, canon(t, byKey[k], apiOnly["key"]...), canon(t, row), "key %v", k)
			}
		}
	})

	t.Run("key record", func(t *testing.T) {
		for _, key := range []string{"K", "G", "F"} {
			for _, out := range []string{"json", "jsonl"} {
				args := []string{"keys", "show", key, "-o", out}
				require.Equal(t, retarget(local(args...)), remote(args...), "seqbox %s", strings.Join(args, " "))
			}
			want := api("/v1/admin/keys/" + key)
			require.Equal(t, canon(t, want, apiOnly["key"]...), canon(t, retarget(local("keys", "show", key, "-o", "json"))), "key %s", key)
			// A line a record, told apart by kind: the key, then what is
			// recorded about it, each the API's view.
			var got []string
			for i, line := range strings.Split(strings.TrimSuffix(local("keys", "show", key, "-o", "jsonl"), "\n"), "\n") {
				if i == 0 {
					continue
				}
				got = append(got, canon(t, line))
			}
			var recorded []string
			for _, list := range []struct{ name, kind string }{{"parked", "parked"}, {"gaps", "gap"}, {"audit", "audit"}} {
				for _, v := range want[list.name].([]any) {
					v.(map[string]any)["kind"] = list.kind
					recorded = append(recorded, canon(t, v))
				}
			}
			require.Equal(t, recorded, got, "key %s", key)
		}
	})

	t.Run("audit row", func(t *testing.T) {
		var shown struct {
			Audit []any `json:"audit"`
		}
		require.NoError(t, json.Unmarshal([]byte(remote("keys", "show", "K", "-o", "json")), &shown))
		require.NotEmpty(t, shown.Audit)
		require.Equal(t, canon(t, api("/v1/admin/audit?object=K")["audit"]), canon(t, shown.Audit))
	})

	t.Run("dead letter", func(t *testing.T) {
		for _, args := range [][]string{{"dlq", "list", "-o", "json"}, {"dlq", "list", "--all", "-o", "json"}} {
			require.Equal(t, local(args...), remote(args...), "seqbox %s", strings.Join(args, " "))
			require.Equal(t, canon(t, api("/v1/admin/dlq" + allQuery(args))["dead_letters"]), canon(t, local(args...)))
		}
		show := []string{"dlq", "show", "1", "-o", "json"}
		require.Equal(t, local(show...), remote(show...))
		require.Equal(t, canon(t, api("/v1/admin/dlq/1")), canon(t, local(show...)))
	})

	t.Run("consumer", func(t *testing.T) {
		// The heartbeat moves while the gateway runs.
		args := []string{"consumers", "list", "-o", "json"}
		l, r := jsonArray(t, local(args...)), jsonArray(t, remote(args...))
		apiRows := api("/v1/admin/consumers")["consumers"].([]any)
		require.Len(t, l, 1)
		require.Len(t, r, 1)
		require.Len(t, apiRows, 1)
		beat := append([]string{"heartbeat_at"}, apiOnly["consumer"]...)
		require.Equal(t, canon(t, apiRows[0], beat...), canon(t, l[0], "heartbeat_at"))
		require.Equal(t, canon(t, l[0], "heartbeat_at"), canon(t, r[0], "heartbeat_at"))
	})

	t.Run("effect", func(t *testing.T) {
		args := []string{"effects", "list", "-o", "json"}
		require.Equal(t, local(args...), remote(args...))
		require.Equal(t, canon(t, api("/v1/admin/effects")["effects"]), canon(t, local(args...)))
	})

	t.Run("effect resolution", func(t *testing.T) {
		keys := map[string]string{}
		for _, e := range api("/v1/admin/effects?state=uncertain")["effects"].([]any) {
			keys[e.(map[string]any)["id"].(string)] = e.(map[string]any)["idempotency_key"].(string)
		}
		require.Equal(t, effectKey, keys["evt-9"])
		resolve := []string{"--state", "succeeded", "--ref", "task-7", "--by", "ana", "--reason", "seen", "-o", "json"}
		l := local(append([]string{"effects", "resolve", keys["evt-9"]}, resolve...)...)
		r := remote(append([]string{"effects", "resolve", keys["evt-10"]}, resolve...)...)
		require.Equal(t, strings.ReplaceAll(l, keys["evt-9"], keys["evt-10"]), r)
		uncertainCallIn(t, db, "gateway", "evt-11")
		var key string
		for _, e := range api("/v1/admin/effects?state=uncertain")["effects"].([]any) {
			key = e.(map[string]any)["idempotency_key"].(string)
		}
		answer := s.admin(t, "POST", "/v1/admin/effects/"+key+"/resolve",
			`{"state":"succeeded","ref":"task-7","by":"ana","reason":"seen"}`, 200)
		require.Equal(t, canon(t, strings.ReplaceAll(l, keys["evt-9"], key)), canon(t, answer))
	})

	// An action's result, last: it changes what the other records show.
	// Each way runs its own request, so its number and who took it differ;
	// all else is one view, the admin API's answer less its decisions alias.
	t.Run("action result", func(t *testing.T) {
		s.event(t, ce("f2", "F", 2, ""))
		s.event(t, ce("h1", "H", 1, ""))
		s.event(t, ce("h3", "H", 3, ""))
		waitUntil(t, "F's successor parked and H blocked by its gap", func() bool {
			n := 0
			for _, k := range s.stuckKeys(t) {
				if (k["partitionkey"] == "F" || k["partitionkey"] == "H") && k["status"] == "blocked" && k["blocked_messages"] == 1.0 {
					n++
				}
			}
			return n == 2
		})
		letters := map[string]string{}
		for _, d := range api("/v1/admin/dlq")["dead_letters"].([]any) {
			d := d.(map[string]any)
			letters[d["id"].(string)] = canon(t, d["seq"])
		}
		require.Equal(t, "1", letters["k2"])
		require.NotEmpty(t, letters["f1"])
		who := []string{"--by", "ana", "--reason", "seen", "-o", "json"}

		// k2 fails every time: each redrive fails again, with one result.
		redrive := append([]string{"dlq", "redrive", "1"}, who...)
		l := failedAgain(t, "1", append(redrive, "--db", db)...)
		r := failedAgain(t, "1", append(redrive, "--server", s.url, "--admin-token", serveToken)...)
		answer := s.admin(t, "POST", "/v1/admin/dlq/1/redrive", `{"by":"ana","reason":"seen"}`, 200)
		require.Equal(t, canon(t, l, byDesign...), canon(t, r, byDesign...), "dlq redrive")
		require.Equal(t, canon(t, answer, append(byDesign, apiOnly["action"]...)...), canon(t, l, byDesign...), "dlq redrive")
		require.Contains(t, l, `"state":"done"`)
		require.Contains(t, l, `"dead_letter":1`)

		// Skip and release run once per target: two of each, compared
		// but for the target and the messages their results name.
		actions := []struct {
			local, remote []string
			targets       [2]string
		}{
			{append([]string{"dlq", "skip", "1"}, who...), append([]string{"dlq", "skip", letters["f1"]}, who...), [2]string{"1", letters["f1"]}},
			{append([]string{"keys", "release", "G"}, who...), append([]string{"keys", "release", "H"}, who...), [2]string{"G", "H"}},
		}
		for _, a := range actions {
			l, r := local(a.local...), remote(a.remote...)
			require.Equal(t, canon(t, actionShape(t, l)), canon(t, actionShape(t, r)), "seqbox %s", strings.Join(a.local, " "))
			for i, out := range []string{l, r} {
				var m map[string]any
				require.NoError(t, json.Unmarshal([]byte(out), &m))
				require.Equal(t, a.targets[i], m["target"])
				require.NotZero(t, m["request"])
			}
		}
	})
}

// actionShape is an action's result without what differs by design
// (byDesign), its target, and its results but for their outcomes.
func actionShape(t *testing.T, out string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m), out)
	for _, k := range append(byDesign, "target") {
		delete(m, k)
	}
	results, ok := m["results"].([]any)
	require.True(t, ok, "results: %s", out)
	outcomes := make([]any, len(results))
	for i, r := range results {
		outcomes[i] = r.(map[string]any)["outcome"]
	}
	m["results"] = outcomes
	return m
}

// allQuery is the admin API's ?all=true when args list everything.
func allQuery(args []string) string {
	for _, a := range args {
		if a == "--all" {
			return "?all=true"
		}
	}
	return ""
}
