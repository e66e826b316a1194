package main

// seqbox collisions: the identities that came again with another payload,
// keyed or not, on the database and through a running gateway's admin
// API, which print the same. Before it, a collision of an unkeyed event
// showed in no command (keys list has no key to show it under, inbox show
// says applied), only in the gateway's API.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCollisionsListsEveryParkedCollision(t *testing.T) {
	// A library consumer's database, through replay.
	db := replayed(t,
		`{"specversion":"1.0","id":"evt-482","source":"crm","type":"task","data":{"qty":10}}`,
		`{"specversion":"1.0","id":"evt-482","source":"crm","type":"task","data":{"qty":12}}`,
		`{"specversion":"1.0","id":"k1","source":"crm","type":"task","partitionkey":"K","objectversion":1}`)
	out := ok(t, "collisions", "--db", db)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	require.Regexp(t, `^PARKED_AT +SOURCE +ID +PARTITIONKEY +FIRST_OUTCOME +DIFFERS_IN$`, lines[0])
	require.Regexp(t, ` crm +evt-482 +- +applied +- *$`, lines[1], "an unkeyed event's collision, its first payload not kept by a library consumer")
	var views []map[string]any
	require.NoError(t, json.Unmarshal([]byte(ok(t, "collisions", "--db", db, "-o", "json")), &views))
	require.Len(t, views, 1)
	require.Equal(t, []any{"crm", "evt-482", "", "applied"}, []any{views[0]["source"], views[0]["id"], views[0]["partitionkey"], views[0]["first_outcome"]})
	require.Contains(t, views[0]["second"].(map[string]any)["text"], `"qty":12`)

	// The gateway keeps the first payload: the fields that differ show.
	gdb := filepath.Join(t.TempDir(), "seqbox.db")
	s := startServe(t, nil, "--db", gdb, "--admin-token", serveToken)
	s.event(t, `{"specversion":"1.0","id":"o-1","source":"erp","type":"order.placed","data":{"qty":10,"sku":"A"}}`)
	waitUntil(t, "o-1 applied", func() bool {
		return strings.Contains(ok(t, "inbox", "show", "erp", "o-1", "--db", gdb), "applied")
	})
	code, body := s.do(t, "POST", "/v1/events", "", map[string]string{"Content-Type": "application/cloudevents+json"},
		`{"specversion":"1.0","id":"o-1","source":"erp","type":"order.placed","data":{"qty":12,"sku":"A"}}`)
	require.Equal(t, 409, code, "the second payload is refused at ingest, and parked for the operator: %v", body)
	waitUntil(t, "the collision parked", func() bool {
		return strings.Contains(ok(t, "collisions", "--db", gdb), "o-1")
	})
	for _, args := range [][]string{{"collisions"}, {"collisions", "-o", "json"}, {"collisions", "-o", "jsonl"}} {
		require.Equal(t, ok(t, append(args, "--db", gdb)...), ok(t, append(args, "--server", s.url, "--admin-token", serveToken)...),
			"seqbox %s", strings.Join(args, " "))
	}
	require.Regexp(t, ` erp +o-1 +- +applied +data\.qty *\n$`, ok(t, "collisions", "--db", gdb))
}

// collisions --limit N lists the oldest N and says on stderr when more
// are parked, on the database and through the admin API alike.
func TestCollisionsSayWhenMoreAreParked(t *testing.T) {
	db := replayed(t,
		`{"specversion":"1.0","id":"a","source":"crm","type":"task","data":{"qty":1}}`,
		`{"specversion":"1.0","id":"a","source":"crm","type":"task","data":{"qty":2}}`,
		`{"specversion":"1.0","id":"b","source":"crm","type":"task","data":{"qty":1}}`,
		`{"specversion":"1.0","id":"b","source":"crm","type":"task","data":{"qty":2}}`)
	r := exe(t, "", "collisions", "--limit", "1", "--db", db)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "seqbox: collisions: the 1 oldest shown; more are parked (raise --limit)\n", r.stderr)
	require.Equal(t, 2, strings.Count(r.stdout, "\n"), r.stdout)
	require.Contains(t, r.stdout, " a ")
	r = exe(t, "", "collisions", "--db", db)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr, "all shown")
	require.Contains(t, fails(t, "collisions", "--limit", "0", "--db", db), "--limit 0: want 1 to 10000")
}

// replayed replays lines (CloudEvents JSON, one a line) into a new SQLite
// database and returns its path.
func replayed(t *testing.T, lines ...string) string {
	t.Helper()
	dir := t.TempDir()
	db, file := filepath.Join(dir, "c.db"), filepath.Join(dir, "c.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	ok(t, "replay", "--db", db, file)
	return db
}
