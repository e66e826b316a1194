package main

// seqbox inbox show|list: what a consumer recorded of its messages, with
// the envelope's tenantid, dataschema and causationid (DESIGN §1:
// carried, indexed, shown), on the database and through a running
// gateway's admin API, which print the same.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInboxShowsAndListsWhatTheConsumerRecorded(t *testing.T) {
	db := filepath.Join(t.TempDir(), "seqbox.db")
	s := startServe(t, nil, "--db", db, "--admin-token", serveToken)
	events := []string{
		`{"specversion":"1.0","id":"e1","source":"erp","type":"order.placed","partitionkey":"PED-1","objectversion":1,"tenantid":"acme","causationid":"CMD-7712","dataschema":"v1"}`,
		`{"specversion":"1.0","id":"e2","source":"erp","type":"order.paid","partitionkey":"PED-1","objectversion":2,"tenantid":"acme","causationid":"CMD-7713","dataschema":"v2"}`,
		`{"specversion":"1.0","id":"e3","source":"erp","type":"order.placed","partitionkey":"PED-2","objectversion":1,"tenantid":"globex","causationid":"CMD-7712"}`,
		// A source with slashes and an id with a space and a slash go
		// through the admin API's path escaped.
		`{"specversion":"1.0","id":"a/b c","source":"https://erp.example/orders","type":"order.noted","tenantid":"ácme"}`,
	}
	for _, e := range events {
		s.event(t, e)
	}
	waitUntil(t, "four identities applied", func() bool {
		out := ok(t, "inbox", "list", "--db", db, "--causation", "CMD-7712", "-o", "json")
		return strings.Count(out, `"outcome":"applied"`) == 2 &&
			strings.Contains(ok(t, "inbox", "list", "--db", db, "--tenant", "ácme"), "applied") &&
			strings.Contains(ok(t, "inbox", "list", "--db", db, "--tenant", "acme"), "order.paid")
	})
	local := func(args ...string) string { t.Helper(); return ok(t, append(args, "--db", db)...) }
	remote := func(args ...string) string {
		t.Helper()
		return ok(t, append(args, "--server", s.url, "--admin-token", serveToken)...)
	}
	for _, args := range [][]string{
		{"inbox", "show", "erp", "e2"}, {"inbox", "show", "erp", "e2", "-o", "json"},
		{"inbox", "show", "https://erp.example/orders", "a/b c"}, {"inbox", "show", "https://erp.example/orders", "a/b c", "-o", "json"},
		{"inbox", "list", "--tenant", "acme"}, {"inbox", "list", "--tenant", "acme", "-o", "json"}, {"inbox", "list", "--tenant", "acme", "-o", "jsonl"},
		{"inbox", "list", "--causation", "CMD-7712"}, {"inbox", "list", "--dataschema", "v2"}, {"inbox", "list", "--tenant", "ácme"},
		{"inbox", "list", "--tenant", "acme", "--causation", "CMD-7712"}, {"inbox", "list", "--tenant", "acme", "--limit", "1"},
		{"inbox", "list", "--tenant", "initech"}, {"inbox", "list", "--tenant", "initech", "-o", "json"},
	} {
		require.Equal(t, local(args...), remote(args...), "seqbox %s", strings.Join(args, " "))
	}

	show := local("inbox", "show", "erp", "e2")
	for _, line := range []string{"consumer:         gateway\n", "outcome:          applied\n", "type:             order.paid\n",
		"partitionkey:     PED-1\n", "objectversion:    2\n", "tenantid:         acme\n", "dataschema:       v2\n",
		"causationid:      CMD-7713\n", "businesskey:      -\n"} {
		require.Contains(t, show, line)
	}
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(local("inbox", "show", "erp", "e1", "-o", "json")), &v))
	require.Equal(t, []any{"erp", "e1", "acme", "CMD-7712", "v1", "applied"},
		[]any{v["source"], v["id"], v["tenantid"], v["causationid"], v["dataschema"], v["outcome"]})

	// Newest first, at most --limit.
	list := strings.Split(strings.TrimSpace(local("inbox", "list", "--tenant", "acme")), "\n")
	require.Len(t, list, 3, list)
	require.Contains(t, list[0], "TENANTID")
	require.Contains(t, list[1], " e2 ")
	require.Contains(t, list[2], " e1 ")
	require.Contains(t, local("inbox", "list", "--tenant", "acme", "--causation", "CMD-7712"), " e1 ")
	require.NotContains(t, local("inbox", "list", "--tenant", "acme", "--causation", "CMD-7712"), " e2 ")
	require.Equal(t, 2, strings.Count(local("inbox", "list", "--tenant", "acme", "--limit", "1"), "\n"))
	require.Equal(t, "[]\n", local("inbox", "list", "--tenant", "initech", "-o", "json"))

	// Refusals, one line each, the same way on both paths.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inbox", "show", "erp", "nope"}, `inbox "erp" "nope": `},
		{[]string{"inbox", "list"}, "--tenant, --causation or --dataschema is required"},
		{[]string{"inbox", "list", "--tenant", "acme", "--limit", "0"}, "--limit 0: from 1 to 1000"},
		{[]string{"inbox", "list", "--tenant", "acme", "--limit", "1001"}, "--limit 1001: from 1 to 1000"},
		{[]string{"inbox", "show", "erp"}, "expects the SOURCE and ID of one event, got 1 arguments"},
		{[]string{"inbox", "show", "erp", " "}, "SOURCE and ID must not be empty"},
	} {
		require.Contains(t, fails(t, append(c.args, "--db", db)...), c.want, "%v --db", c.args)
		require.Contains(t, fails(t, append(c.args, "--server", s.url, "--admin-token", serveToken)...), c.want, "%v --server", c.args)
	}
	require.Contains(t, fails(t, "inbox", "show", "erp", "nope", "--db", db), "not found (consumer \"gateway\")")
	require.Contains(t, fails(t, "inbox", "show", "erp", "nope", "--server", s.url, "--admin-token", serveToken), "answered 404 Not Found: not found")
	// The admin API refuses a listing with no filter, or a bad limit.
	s.admin(t, "GET", "/v1/admin/inbox", "", 400)
	s.admin(t, "GET", "/v1/admin/inbox?tenant=acme&limit=x", "", 400)
	s.admin(t, "GET", "/v1/admin/inbox/erp/nope", "", 404)
	got := s.admin(t, "GET", "/v1/admin/inbox?dataschema=v1", "", 200)
	require.Equal(t, "gateway", got["consumer"])
	require.Len(t, got["identities"], 1)
}

// inbox --server reads only the admin API's shapes: a list without its
// "identities" array, or another identity than the one asked for, is an
// error naming what was expected.
func TestInboxRemoteRefusesAnswersOfAnotherShape(t *testing.T) {
	t.Parallel()
	gw := fakeGateway(t, map[string]string{
		"GET /v1/admin/overview":      `{"consumer":"gateway"}`,
		"GET /v1/admin/inbox":         `{"consumer":"gateway"}`,
		"GET /v1/admin/inbox/erp/e1":  `{"source":"erp","id":"e2"}`,
		"GET /v1/admin/inbox/erp/bad": `{"source":"erp","id":"bad","received_at":"yesterday"}`,
	})
	flags := []string{"--server", gw.URL, "--admin-token", serveToken}
	require.Equal(t, "seqbox: inbox list: the answer of "+gw.URL+" to GET /v1/admin/inbox?limit=50&tenant=acme "+
		`is not the admin API's: want a JSON object with a "identities" array, got an object without "identities"`,
		fails(t, append([]string{"inbox", "list", "--tenant", "acme"}, flags...)...))
	require.Equal(t, "seqbox: inbox show: the answer of "+gw.URL+" to GET /v1/admin/inbox/erp/e1 "+
		`is not the admin API's: want identity "erp" "e1", got "erp" "e2"`,
		fails(t, append([]string{"inbox", "show", "erp", "e1"}, flags...)...))
	require.Contains(t, fails(t, append([]string{"inbox", "show", "erp", "bad"}, flags...)...), `received_at "yesterday"`)
}

// An identity's processed_at is when its outcome became final, whatever
// the outcome: stale, dead-lettered, expired and semantic duplicates
// once showed none, as if never processed. One parked (held) has none
// yet.
func TestInboxProcessedAtIsSetForEveryFinalOutcome(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "seqbox.db")
	events := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(events, []byte(strings.Join([]string{
		`{"specversion":"1.0","id":"a1","source":"s","type":"t","partitionkey":"K","objectversion":2}`,
		`{"specversion":"1.0","id":"a0","source":"s","type":"t","partitionkey":"K","objectversion":1}`,
		`{"specversion":"1.0","id":"p1","source":"s","type":"t","partitionkey":"P","objectversion":1,"data":{"fail":"permanent"}}`,
		`{"specversion":"1.0","id":"h1","source":"s","type":"t","partitionkey":"H","objectversion":1}`,
		`{"specversion":"1.0","id":"h3","source":"s","type":"t","partitionkey":"H","objectversion":3}`,
		`{"specversion":"1.0","id":"x1","source":"s","type":"t","time":"2020-01-01T00:00:00Z"}`,
		`{"specversion":"1.0","id":"b1","source":"s","type":"t","businesskey":"B"}`,
		`{"specversion":"1.0","id":"b2","source":"s","type":"t","businesskey":"B"}`,
	}, "\n")+"\n"), 0o644))
	ok(t, "replay", "--db", db, "--max-age", "1h", "--now", "2026-12-06T12:00:00Z", events)
	for id, want := range map[string][]any{
		"a1": {"applied", "2026-12-06T12:00:00Z"}, "a0": {"stale", "2026-12-06T12:00:00Z"},
		"p1": {"dead_lettered", "2026-12-06T12:00:00Z"}, "h1": {"applied", "2026-12-06T12:00:00Z"},
		"h3": {"held", nil}, "x1": {"expired", "2026-12-06T12:00:00Z"},
		"b1": {"applied", "2026-12-06T12:00:00Z"}, "b2": {"semantic_duplicate", "2026-12-06T12:00:00Z"},
	} {
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(ok(t, "inbox", "show", "--db", db, "s", id, "-o", "json")), &v))
		require.Equal(t, want, []any{v["outcome"], v["processed_at"]}, id)
	}
}

// The password in --agent-url is never logged: the line that says what
// serve runs shows it redacted, as the agent's failures do.
func TestServeLogsTheAgentURLRedacted(t *testing.T) {
	t.Parallel()
	s := startServe(t, nil, "--db", filepath.Join(t.TempDir(), "seqbox.db"), "--agent-url", "http://agentuser:S3cretPass@127.0.0.1:9/")
	require.Contains(t, s.stderrText(), "agentuser:xxxxx@127.0.0.1:9")
	require.NotContains(t, s.stderrText(), "S3cretPass")
}

// A key or identity named "." or ".." is reached through --server as
// through --db: the client escapes such a path segment (%2E), which an
// HTTP stack would otherwise take for the current or parent directory
// (the gateway answered 307 to the cleaned path, and the client blamed
// --server).
func TestRemoteReachesDotNames(t *testing.T) {
	db := filepath.Join(t.TempDir(), "seqbox.db")
	s := startServe(t, nil, "--db", db, "--admin-token", serveToken)
	s.event(t, `{"specversion":"1.0","id":".","source":"..","type":"t","partitionkey":"..","objectversion":1,"data":{"fail":"permanent"}}`)
	waitUntil(t, "key .. blocked", func() bool { return len(s.stuckKeys(t)) == 1 })
	for _, args := range [][]string{{"keys", "show", ".."}, {"inbox", "show", "..", "."}, {"inbox", "show", "..", ".", "-o", "json"}} {
		local := ok(t, append(args, "--db", db)...)
		remote := ok(t, append(args, "--server", s.url, "--admin-token", serveToken)...)
		if args[0] == "keys" {
			local = strings.ReplaceAll(local, " --db "+db+" --consumer gateway", " --server "+s.url)
		}
		require.Equal(t, local, remote, "seqbox %s", strings.Join(args, " "))
	}
}
