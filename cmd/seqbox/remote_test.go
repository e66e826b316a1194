package main

// The dlq and keys commands with --server, against a real `seqbox serve`
// on loopback: they print what the database path prints for the same
// data, their actions go through the gateway's consumer with who asked
// and why, and every failure is one line.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/cli"
	"github.com/stretchr/testify/require"
)

// exeEnv is exe with extra environment variables.
func exeEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(environ(), env...)
	cmd.Dir = t.TempDir()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("seqbox %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// stuckServer starts seqbox serve on a fresh SQLite database with two
// stuck keys: K, blocked behind dead letter 1 (k2 fails permanently) with
// k3 parked behind it, and G, blocked by a gap (v2 never came; the hold
// expired).
func stuckServer(t *testing.T, flags ...string) (*server, string) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "seqbox.db")
	s := startServe(t, nil, append([]string{"--db", db, "--admin-token", serveToken, "--hold-timeout", "300ms"}, flags...)...)
	s.event(t, ce("k1", "K", 1, ""))
	s.event(t, ce("k2", "K", 2, `{"fail":"permanent"}`))
	s.event(t, ce("k3", "K", 3, ""))
	s.event(t, ce("g1", "G", 1, ""))
	s.event(t, ce("g3", "G", 3, ""))
	waitUntil(t, "K and G blocked", func() bool {
		blocked := 0
		for _, k := range s.stuckKeys(t) {
			if k["status"] == "blocked" && k["blocked_messages"] == 1.0 {
				blocked++
			}
		}
		return blocked == 2
	})
	return s, db
}

func TestRemoteCommandsMatchTheDatabase(t *testing.T) {
	s, db := stuckServer(t)
	remote := func(args ...string) string {
		t.Helper()
		return ok(t, append(args, "--server", s.url, "--admin-token", serveToken)...)
	}
	// The database path opens the file read-only, beside the running
	// gateway.
	local := func(args ...string) string {
		t.Helper()
		return ok(t, append(args, "--db", db)...)
	}
	// The advice printed next to a blocked key names the way it was read.
	retarget := func(out string) string {
		return strings.ReplaceAll(out, " --db "+db+" --consumer gateway", " --server "+s.url)
	}
	same := func() {
		t.Helper()
		for _, args := range [][]string{
			{"dlq", "list"}, {"dlq", "list", "--json"}, {"dlq", "list", "--all"}, {"dlq", "list", "--all", "--json"},
			{"dlq", "show", "1"}, {"dlq", "show", "1", "--json"},
			{"dlq", "list", "--output", "json"}, {"dlq", "list", "--all", "-o", "json"}, {"dlq", "show", "1", "--output", "json"},
		} {
			require.Equal(t, local(args...), remote(args...), "seqbox %s", strings.Join(args, " "))
		}
		for _, args := range [][]string{
			{"keys", "list"}, {"keys", "list", "--json"}, {"keys", "list", "--all"}, {"keys", "list", "--all", "--json"},
			{"keys", "show", "K"}, {"keys", "show", "K", "--json"}, {"keys", "show", "G"}, {"keys", "show", "G", "--json"},
			{"keys", "list", "--output", "json"}, {"keys", "list", "--all", "--output", "json"}, {"keys", "show", "K", "--output", "json"},
		} {
			require.Equal(t, retarget(local(args...)), remote(args...), "seqbox %s", strings.Join(args, " "))
		}
		// The consumers, their heartbeat aside (it moves while they run).
		beat := regexp.MustCompile(`"heartbeat_at":"[^"]*"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
		for _, args := range [][]string{{"consumers", "list"}, {"consumers", "list", "--output", "json"}} {
			l, r := local(args...), remote(args...)
			require.Contains(t, l, "gateway")
			require.Equal(t, beat.ReplaceAllString(l, "T"), beat.ReplaceAllString(r, "T"), "seqbox %s", strings.Join(args, " "))
		}
	}

	same()
	out := remote("keys", "list")
	require.Equal(t, 3, strings.Count(out, "\n"), out)
	require.Contains(t, out, "seqbox dlq redrive 1 --server "+s.url+"  # or: seqbox dlq skip 1 --by WHO --reason WHY --server "+s.url)
	require.Contains(t, out, "seqbox keys release G --by WHO --reason WHY --server "+s.url)
	require.Contains(t, remote("dlq", "list"), "1    crm     k2  K             2              permanent failure  1  ")
	// The token may come from the environment, as for seqbox serve.
	r := exeEnv(t, []string{cli.AdminTokenEnv + "=" + serveToken}, "dlq", "show", "1", "--server", s.url)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, local("dlq", "show", "1"), r.stdout)

	// A key blocked behind a dead letter is released by resolving it, as
	// on the database path.
	require.Equal(t, retarget(fails(t, "keys", "release", "--output", "jsonl", "K", "--by", "a", "--reason", "b", "--db", db)),
		fails(t, "keys", "release", "--output", "jsonl", "K", "--by", "a", "--reason", "b", "--server", s.url, "--admin-token", serveToken))

	// k2 fails every time: the redrive dead-letters it again, still as row
	// 1, and the request records who asked and why.
	s.admin(t, "GET", "/v1/admin/requests/1", "", 404)
	require.Equal(t, lines(
		`{"source":"crm","id":"k2","partitionkey":"K","objectversion":2,"outcome":"dead_lettered",`+
			`"reason":"permanent failure: permanent: record: data.fail=permanent"}`,
	), failedAgain(t, "1", "dlq", "redrive", "--output", "jsonl", "1", "--by", "bob", "--reason", "retry after the fix", "--server", s.url, "--admin-token", serveToken))
	req := s.admin(t, "GET", "/v1/admin/requests/1", "", 200)
	require.Equal(t, []any{"redrive", "1", "bob", "retry after the fix", "done"},
		[]any{req["action"], req["target"], req["by"], req["reason"], req["state"]})
	same()
	require.Contains(t, remote("keys", "show", "K"), "blocked_by:       source=crm id=k2 dlq=1\n")

	// Skip row 1 and release G: the keys clear and what was parked applies.
	require.Equal(t, lines(`{"source":"crm","id":"k3","partitionkey":"K","objectversion":3,"outcome":"applied","reason":""}`),
		remote("dlq", "skip", "--output", "jsonl", "1", "--by", "alice", "--reason", "refunded by hand"))
	require.Equal(t, lines(`{"source":"crm","id":"g3","partitionkey":"G","objectversion":3,"outcome":"applied","reason":""}`),
		remote("keys", "release", "--output", "jsonl", "G", "--by", "carol", "--reason", "v2 was never sent"))
	for seq, want := range map[string][]any{"2": {"skip", "1", "alice", "refunded by hand"}, "3": {"release", "G", "carol", "v2 was never sent"}} {
		req := s.admin(t, "GET", "/v1/admin/requests/"+seq, "", 200)
		require.Equal(t, want, []any{req["action"], req["target"], req["by"], req["reason"]})
	}
	require.Equal(t, lines(keysHeaderRemote), remote("keys", "list"))
	require.Empty(t, remote("dlq", "list", "--json"))
	require.Contains(t, remote("keys", "show", "G"), "\ngaps:\nFROM_VERSION  TO_VERSION  DECIDED_BY  REASON             AT\n2             2           carol       v2 was never sent  ")
	require.Contains(t, remote("dlq", "list", "--all"), "skipped by alice: refunded by hand")
	same()

	// A resolved row cannot be resolved again; the gateway says why.
	require.Equal(t, "seqbox: dlq redrive: the gateway at "+s.url+" answered 409 Conflict: dlq 1 is already resolved: skipped by alice: refunded by hand",
		fails(t, "dlq", "redrive", "--output", "jsonl", "1", "--server", s.url, "--admin-token", serveToken))
	require.Equal(t, "seqbox: keys release: key \"G\" is not blocked (status ok)",
		fails(t, "keys", "release", "--output", "jsonl", "G", "--by", "a", "--reason", "b", "--server", s.url, "--admin-token", serveToken))
}

// keysHeaderRemote is the header of an empty keys list.
const keysHeaderRemote = "PARTITIONKEY  STATUS  VERSION  EXPECTED  LOWEST_PARKED  HELD  BLOCKED_MESSAGES  SINCE  REASON  ACTION"

// Without the token, or with a wrong one, every command fails in one line
// and nothing changes.
func TestRemoteServerRefusesWithoutTheToken(t *testing.T) {
	s, _ := stuckServer(t)
	before := ok(t, "keys", "list", "--server", s.url, "--admin-token", serveToken)
	missing := "the gateway at " + s.url + " needs its admin token: give --admin-token or set SEQBOX_ADMIN_TOKEN " +
		"(401 Unauthorized: missing or wrong Bearer token in the Authorization header)"
	wrong := "the gateway at " + s.url + " refused the admin token " +
		"(401 Unauthorized: missing or wrong Bearer token in the Authorization header): check --admin-token or SEQBOX_ADMIN_TOKEN"
	for _, c := range []struct {
		args []string
		cmd  string // the command and what it asked about first
	}{
		{[]string{"dlq", "list"}, "dlq list"},
		{[]string{"dlq", "show", "1"}, "dlq show: dlq 1"},
		{[]string{"keys", "list", "--json"}, "keys list"},
		{[]string{"keys", "show", "K"}, `keys show: key "K"`},
		{[]string{"dlq", "redrive", "--output", "jsonl", "1"}, "dlq redrive"},
		{[]string{"dlq", "skip", "--output", "jsonl", "1", "--by", "mallory", "--reason", "because"}, "dlq skip"},
		{[]string{"keys", "release", "--output", "jsonl", "G", "--by", "mallory", "--reason", "because"}, `keys release: key "G"`},
	} {
		args := append(c.args, "--server", s.url)
		require.Equal(t, "seqbox: "+c.cmd+": "+missing, fails(t, args...))
		r := exeEnv(t, []string{cli.AdminTokenEnv + "=not-the-token-0123456789"}, args...)
		require.NotEqual(t, 0, r.code)
		require.Empty(t, r.stdout)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
		require.Equal(t, "seqbox: "+c.cmd+": "+wrong+"\n", r.stderr)
	}
	require.Equal(t, before, ok(t, "keys", "list", "--server", s.url, "--admin-token", serveToken), "a refused request changes nothing")
	s.admin(t, "GET", "/v1/admin/requests/1", "", 404)
}

func TestRemoteServerFlagErrors(t *testing.T) {
	s, db := stuckServer(t)
	tok := []string{"--admin-token", serveToken}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"db and server", []string{"dlq", "list", "--db", db, "--server", s.url},
			"seqbox: dlq list: --db and --server are mutually exclusive: give --db to read the database, or --server to ask a running seqbox serve"},
		{"db and server on an action", append([]string{"keys", "release", "--output", "jsonl", "G", "--by", "a", "--reason", "b", "--server", s.url, "--db", db}, tok...),
			"seqbox: keys release: --db and --server are mutually exclusive: give --db to read the database, or --server to ask a running seqbox serve"},
		{"token without server", []string{"keys", "list", "--db", db, "--admin-token", serveToken},
			"seqbox: --admin-token is for --server: the database path needs no token"},
		{"not a URL", []string{"dlq", "list", "--server", "127.0.0.1:8080"},
			`seqbox: --server "127.0.0.1:8080": want the gateway's URL, such as http://127.0.0.1:8080`},
		// Refused, and the password never repeated: it used to be named
		// in every message about the gateway.
		{"a password in the URL", []string{"dlq", "list", "--server", "http://user:secret@127.0.0.1:1"},
			"seqbox: --server http://user:xxxxx@127.0.0.1:1: a user or password in the URL is not used: give the admin token with --admin-token or SEQBOX_ADMIN_TOKEN"},
		{"another consumer", append([]string{"dlq", "list", "--server", s.url, "--consumer", "billing"}, tok...),
			`seqbox: --consumer "billing": the gateway at ` + s.url + ` serves consumer "gateway"`},
		{"unknown seq", append([]string{"dlq", "show", "42", "--server", s.url}, tok...),
			"seqbox: dlq show: dlq 42: the gateway at " + s.url + " answered 404 Not Found: not found"},
		{"unknown seq redrive", append([]string{"dlq", "redrive", "--output", "jsonl", "42", "--server", s.url}, tok...),
			"seqbox: dlq redrive: the gateway at " + s.url + " answered 404 Not Found: dlq 42: not found"},
		{"unknown key", append([]string{"keys", "show", "NOPE", "--server", s.url}, tok...),
			`seqbox: keys show: key "NOPE": the gateway at ` + s.url + " answered 404 Not Found: not found"},
		{"skip needs who and why", append([]string{"dlq", "skip", "--output", "jsonl", "1", "--server", s.url}, tok...),
			"seqbox: dlq skip: --by and --reason are required: the recorded gap must be attributable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, fails(t, c.args...))
		})
	}
	// The right consumer named is fine.
	require.Equal(t, ok(t, "dlq", "list", "--db", db),
		ok(t, append([]string{"dlq", "list", "--server", s.url + "/", "--consumer", "gateway"}, tok...)...))
}

// A gateway that does not answer is named, with the reason.
func TestRemoteServerUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	for _, args := range [][]string{
		{"dlq", "list"},
		{"keys", "release", "--output", "jsonl", "K", "--by", "a", "--reason", "b"},
	} {
		line := fails(t, append(args, "--server", "http://"+addr, "--admin-token", serveToken)...)
		require.True(t, strings.HasPrefix(line, "seqbox: "+args[0]+" "+args[1]+": the gateway at http://"+addr+" does not answer: "), line)
		require.Contains(t, line, "connection refused")
		require.True(t, strings.HasSuffix(line, "(is seqbox serve running there?)"), line)
	}
}

// keys show prints the lowest --parked parked messages of a key (100
// unless set), says how many there are, and reads the same page through
// the admin API: a key blocked for a weekend may hold a hundred thousand,
// and keys show printed them all (10.6 s and 700 MB as JSON).
func TestKeysShowPrintsAPageOfParkedMessages(t *testing.T) {
	s, db := stuckServer(t)
	s.event(t, ce("k4", "K", 4, ""))
	s.event(t, ce("k5", "K", 5, ""))
	waitUntil(t, "three parked behind K", func() bool {
		for _, k := range s.stuckKeys(t) {
			if k["partitionkey"] == "K" {
				return k["blocked_messages"] == 3.0
			}
		}
		return false
	})
	local := func(args ...string) string { return ok(t, append(args, "--db", db)...) }
	remote := func(args ...string) string {
		return ok(t, append(args, "--server", s.url, "--admin-token", serveToken)...)
	}
	retarget := func(out string) string {
		return strings.ReplaceAll(out, " --db "+db+" --consumer gateway", " --server "+s.url)
	}
	for _, args := range [][]string{{"keys", "show", "K", "--parked", "2"}, {"keys", "show", "K", "--parked", "2", "-o", "json"},
		{"keys", "show", "K", "--parked", "2", "-o", "jsonl"}, {"keys", "show", "K"}} {
		require.Equal(t, retarget(local(args...)), remote(args...), "seqbox %s", strings.Join(args, " "))
	}
	out := local("keys", "show", "K", "--parked", "2")
	_, parked, found := strings.Cut(out, "\nparked (2 of 3 shown; --parked N shows more):\n")
	require.True(t, found, out)
	parked, _, _ = strings.Cut(parked, "\ngaps:")
	require.Contains(t, parked, " k3 ")
	require.Contains(t, parked, " k4 ")
	require.NotContains(t, parked, " k5 ", "the lowest two")
	require.NotContains(t, local("keys", "show", "K"), "shown;", "all three fit the default page")
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(local("keys", "show", "K", "--parked", "2", "-o", "json")), &doc))
	require.EqualValues(t, 3, doc["parked_total"])
	require.Len(t, doc["parked"], 2)
	require.NotNil(t, doc["parked_next"])
	for _, bad := range []string{"0", "10001", "-1"} {
		require.Contains(t, fails(t, "keys", "show", "K", "--parked", bad, "--db", db), "--parked "+bad+": want 1 to 10000")
	}
}
