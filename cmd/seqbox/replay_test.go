package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// now fixes the clock of every run that records times, so the output is
// exact.
const now = "2026-01-02T03:04:05Z"

func TestDemo(t *testing.T) {
	t.Parallel()
	out := ok(t, "demo")
	ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Equal(t, "deliveries=4 accepted=2 duplicates=2 inbox_rows=2 business_effects=2", ls[len(ls)-1])
}

// outcomesArgs replay testdata/outcomes.jsonl, whose lines reach every
// outcome of docs/design.md §4: the clock and max age make d1 expired, two
// attempts make e1 retry once and then dead-letter.
func outcomesArgs(t *testing.T, db string, extra ...string) []string {
	return append([]string{"replay", "--db", db, "--now", now, "--max-age", "24h", "--max-attempts", "2"},
		append(extra, fixture(t, "outcomes.jsonl"))...)
}

func TestReplayEveryOutcome(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	out := ok(t, outcomesArgs(t, db)...)
	require.Equal(t, lines(
		`{"source":"shop","id":"a1","partitionkey":"A","objectversion":1,"outcome":"applied","reason":""}`,
		`{"source":"shop","id":"a1","partitionkey":"A","objectversion":1,"outcome":"duplicate","reason":"identity already recorded (applied)"}`,
		`{"source":"shop","id":"a1","partitionkey":"A","objectversion":1,"outcome":"collision",`+
			`"reason":"identity already recorded with payload hash 8e5f113d07a2, this one has 392ffbe6288b"}`,
		`{"source":"shop","id":"b5","partitionkey":"B","objectversion":5,"outcome":"applied","reason":""}`,
		`{"source":"shop","id":"c1","partitionkey":"C","objectversion":1,"outcome":"semantic_duplicate",`+
			`"reason":"business key \"followup:B:meeting-1\" was already applied under another identity"}`,
		`{"source":"shop","id":"a3","partitionkey":"A","objectversion":3,"outcome":"held","reason":"waiting for version 2 (got 3)"}`,
		`{"source":"shop","id":"a2","partitionkey":"A","objectversion":2,"outcome":"applied","reason":""}`,
		// The held a3 is released by a2 and prints a second line.
		`{"source":"shop","id":"a3","partitionkey":"A","objectversion":3,"outcome":"applied","reason":""}`,
		// A malformed line is an outcome, and replay goes on; the reason
		// names the envelope and the byte.
		`{"source":"","id":"","partitionkey":"","objectversion":null,"outcome":"rejected",`+
			`"reason":"invalid event: envelope: not a JSON object: invalid character 'h' in literal true (expecting 'r') (at byte 1)"}`,
		`{"source":"shop","id":"a1-late","partitionkey":"A","objectversion":1,"outcome":"stale",`+
			`"reason":"version 1 is older than the committed version 3"}`,
		`{"source":"shop","id":"a3-again","partitionkey":"A","objectversion":3,"outcome":"version_conflict",`+
			`"reason":"version 3 is already committed under another identity, or under this one if retention purged it before this redelivery"}`,
		`{"source":"shop","id":"d1","partitionkey":"D","objectversion":1,"outcome":"expired",`+
			`"reason":"occurred at 2025-12-01T00:00:00Z, past the 24h0m0s business deadline"}`,
		`{"source":"shop","id":"e1","partitionkey":"E","objectversion":1,"outcome":"retry",`+
			`"reason":"attempt 1 of 2 failed: record: data.fail=transient"}`,
		`{"source":"shop","id":"e1","partitionkey":"E","objectversion":1,"outcome":"dead_lettered",`+
			`"reason":"attempts exhausted (2 of 2): record: data.fail=transient"}`,
		`{"source":"shop","id":"e2","partitionkey":"E","objectversion":2,"outcome":"blocked",`+
			`"reason":"key blocked since 2026-01-02T03:04:05Z: dead-lettered e1: attempts exhausted (2 of 2)"}`,
		"deliveries=14 accepted=4 duplicates=1 inbox_rows=10 business_effects=4 applied=4 duplicate=1 collision=1 "+
			"semantic_duplicate=1 stale=1 version_conflict=1 held=1 expired=1 blocked=1 retry=1 dead_lettered=1 rejected=1",
	), out)

	// The same file again on the same database applies nothing: every
	// identity is a duplicate; the collision still collides and the
	// malformed line is still rejected, under the identity of its bytes.
	out = ok(t, outcomesArgs(t, db, "--state")...)
	dup := func(id, key string, v int, was string) string {
		return `{"source":"shop","id":"` + id + `","partitionkey":"` + key + `","objectversion":` + strconv.Itoa(v) +
			`,"outcome":"duplicate","reason":"identity already recorded (` + was + `)"}`
	}
	require.Equal(t, lines(
		dup("a1", "A", 1, "applied"),
		dup("a1", "A", 1, "applied"),
		`{"source":"shop","id":"a1","partitionkey":"A","objectversion":1,"outcome":"collision",`+
			`"reason":"identity already recorded with payload hash 8e5f113d07a2, this one has 392ffbe6288b"}`,
		dup("b5", "B", 5, "applied"),
		dup("c1", "C", 1, "semantic_duplicate"),
		dup("a3", "A", 3, "applied"),
		dup("a2", "A", 2, "applied"),
		`{"source":"","id":"","partitionkey":"","objectversion":null,"outcome":"rejected",`+
			`"reason":"invalid event: envelope: not a JSON object: invalid character 'h' in literal true (expecting 'r') (at byte 1)"}`,
		dup("a1-late", "A", 1, "stale"),
		dup("a3-again", "A", 3, "version_conflict"),
		dup("d1", "D", 1, "expired"),
		dup("e1", "E", 1, "dead_lettered"),
		dup("e2", "E", 2, "blocked"),
		"deliveries=13 accepted=0 duplicates=11 inbox_rows=10 business_effects=4 applied=0 duplicate=11 collision=1 "+
			"semantic_duplicate=0 stale=0 version_conflict=0 held=0 expired=0 blocked=0 retry=0 dead_lettered=0 rejected=1",
		// --state: one line per key after the counters.
		`{"partitionkey":"A","version":3,"state":"order.shipped","blocked":false,"held":0}`,
		`{"partitionkey":"B","version":5,"state":"followup.requested","blocked":false,"held":0}`,
		`{"partitionkey":"C","version":1,"state":"","blocked":false,"held":0}`,
		`{"partitionkey":"D","version":null,"state":"","blocked":false,"held":0}`,
		`{"partitionkey":"E","version":null,"state":"","blocked":true,"held":0}`,
	), out)

	// The second run added no DLQ row: the rejected line has an identity
	// (the hash of its bytes), and the dead-lettered e1 was a duplicate.
	require.Equal(t, map[int64]string{1: "", 2: ""}, openDLQ(t, "dlq", "list", "--all", "--db", db, "--json"))
}

func TestReplayStdinAndTemporaryDB(t *testing.T) {
	t.Parallel()
	in, err := os.ReadFile(fixture(t, "gap.jsonl"))
	require.NoError(t, err)
	r := exe(t, string(in), "replay", "--now", now, "--state", "-")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.Equal(t, lines(
		`{"source":"crm","id":"k3-v1","partitionkey":"K3","objectversion":1,"outcome":"applied","reason":""}`,
		`{"source":"crm","id":"k3-v3","partitionkey":"K3","objectversion":3,"outcome":"held","reason":"waiting for version 2 (got 3)"}`,
		"deliveries=2 accepted=1 duplicates=0 inbox_rows=2 business_effects=1 applied=1 duplicate=0 collision=0 "+
			"semantic_duplicate=0 stale=0 version_conflict=0 held=1 expired=0 blocked=0 retry=0 dead_lettered=0 rejected=0",
		`{"partitionkey":"K3","version":1,"state":"deal.opened","blocked":false,"held":1}`,
	), r.stdout)
}

func TestReplayErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := fixture(t, "gap.jsonl")

	t.Run("bad flag", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "seqbox: replay: unknown flag: --bogus (see seqbox replay --help)",
			fails(t, "replay", "--bogus", file))
	})
	t.Run("bad policy value", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, `seqbox: invalid config: GapPolicy: "sideways" is not hold or advance`,
			fails(t, "replay", "--gap-policy", "sideways", file))
	})
	t.Run("negative durations", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "seqbox: --hold-timeout -5s: must not be negative", fails(t, "replay", "--hold-timeout", "-5s", file))
		require.Equal(t, "seqbox: --max-age -1s: must not be negative", fails(t, "replay", "--max-age", "-1s", file))
		require.Equal(t, "seqbox: --max-block -1h0m0s: must not be negative", fails(t, "replay", "--max-block", "-1h", file))
	})
	t.Run("first version below -1", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "seqbox: --first-version -5: must be a version (0 or more), or -1 for the first version seen",
			fails(t, "replay", "--first-version", "-5", file))
	})
	t.Run("a directory as the file, no database left behind", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "new.db")
		require.Equal(t, "seqbox: replay: "+dir+" is a directory, not a file of events", fails(t, "replay", "--db", db, dir))
		_, err := os.Stat(db)
		require.True(t, os.IsNotExist(err), "no database was created")
	})
	t.Run("bad time", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, `seqbox: --now "yesterday": not an RFC 3339 time`, fails(t, "replay", "--now", "yesterday", file))
	})
	t.Run("no file argument", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "seqbox: accepts 1 arg(s), received 0", fails(t, "replay"))
	})
	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		missing := filepath.Join(dir, "missing.jsonl")
		require.Equal(t, "seqbox: replay: open "+missing+": no such file or directory", fails(t, "replay", missing))
	})
	t.Run("not a seqbox database", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(dir, "notes.txt")
		content := []byte("these are my notes, not a database\n")
		require.NoError(t, os.WriteFile(db, content, 0o644))
		line := fails(t, "replay", "--db", db, file)
		require.True(t, strings.HasPrefix(line, "seqbox: not a seqbox database: "+db), line)
		got, err := os.ReadFile(db)
		require.NoError(t, err)
		require.Equal(t, content, got, "a foreign file must be left untouched")
	})
}

// Input with more than one meaning is rejected, naming the field (docs/design.md
// §3): a member name repeated at any depth. A JSON syntax error names the
// envelope and the byte.
func TestReplayRejectsDuplicateMemberNames(t *testing.T) {
	t.Parallel()
	in := lines(
		`{"specversion":"1.0","id":"a","id":"b","source":"s","type":"t"}`,
		`{"specversion":"1.0","id":"c","source":"s","type":"t","data":{"a":{"b":1,"b":2}}}`,
		`{"specversion":"1.0","id":"d","source":"s","type":"t",}`,
	)
	r := exe(t, in, "replay", "--now", now, "-")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.Equal(t, lines(
		`{"source":"s","id":"","partitionkey":"","objectversion":null,"outcome":"rejected",`+
			`"reason":"invalid event: id: duplicate member name \"id\" (at byte 30)"}`,
		`{"source":"s","id":"c","partitionkey":"","objectversion":null,"outcome":"rejected",`+
			`"reason":"invalid event: data.a.b: duplicate member name \"b\" (at byte 73)"}`,
		`{"source":"","id":"","partitionkey":"","objectversion":null,"outcome":"rejected",`+
			`"reason":"invalid event: envelope: not a JSON object: invalid character '}' looking for beginning of object key string (at byte 54)"}`,
		"deliveries=3 accepted=0 duplicates=0 inbox_rows=0 business_effects=0 applied=0 duplicate=0 collision=0 "+
			"semantic_duplicate=0 stale=0 version_conflict=0 held=0 expired=0 blocked=0 retry=0 dead_lettered=0 rejected=3",
	), r.stdout)
}

// An oversized line is one rejected outcome with its size, the lines after
// it still run, and a second replay adds no DLQ row for it.
func TestReplayOversizedLine(t *testing.T) {
	t.Parallel()
	big := `{"id":"big","source":"s","type":"t","data":"` + strings.Repeat("a", 2<<20) + `"}`
	in := filepath.Join(t.TempDir(), "in.jsonl")
	require.NoError(t, os.WriteFile(in, []byte(big+"\n"+`{"id":"after","source":"s","type":"t"}`+"\n"), 0o600))
	db := newDB(t)
	for run := 1; run <= 2; run++ {
		out := strings.Split(strings.TrimSuffix(ok(t, "replay", "--db", db, in), "\n"), "\n")
		require.Len(t, out, 3)
		require.Contains(t, out[0], `"outcome":"rejected"`)
		require.Contains(t, out[0], fmt.Sprintf("envelope: %d bytes, larger than the 1048576-byte limit", len(big)))
		want := `"outcome":"applied"`
		if run == 2 {
			want = `"outcome":"duplicate"`
		}
		require.Contains(t, out[1], want)
	}
	require.Len(t, strings.Split(strings.TrimSuffix(ok(t, "dlq", "list", "--db", db, "--json"), "\n"), "\n"), 1,
		"one DLQ row for the oversized line, however often it is replayed")
}

// A held message that its predecessor lets out and that then fails
// transiently is retried at once in a replay, as any retry is there
// (docs/design.md §17), until it applies or is dead-lettered; before
// this test a mutant of that rule for unparked messages (unpark.go)
// survived every suite, and the replay ended with f2 still held.
func TestReplayRetriesAnUnparkedMessageAtOnce(t *testing.T) {
	t.Parallel()
	in := `{"specversion":"1.0","id":"f2","source":"shop","type":"order.paid","partitionkey":"F","objectversion":2,"data":{"fail":"transient"}}
{"specversion":"1.0","id":"f1","source":"shop","type":"order.created","partitionkey":"F","objectversion":1}
`
	r := exe(t, in, "replay", "--now", now, "--max-attempts", "2", "--first-version", "1", "-")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, lines(
		`{"source":"shop","id":"f2","partitionkey":"F","objectversion":2,"outcome":"held","reason":"waiting for version 1 (got 2)"}`,
		`{"source":"shop","id":"f1","partitionkey":"F","objectversion":1,"outcome":"applied","reason":""}`,
		`{"source":"shop","id":"f2","partitionkey":"F","objectversion":2,"outcome":"retry",`+
			`"reason":"attempt 1 of 2 failed: record: data.fail=transient"}`,
		`{"source":"shop","id":"f2","partitionkey":"F","objectversion":2,"outcome":"dead_lettered",`+
			`"reason":"attempts exhausted (2 of 2): record: data.fail=transient"}`,
		"deliveries=2 accepted=1 duplicates=0 inbox_rows=2 business_effects=1 applied=1 duplicate=0 collision=0 "+
			"semantic_duplicate=0 stale=0 version_conflict=0 held=1 expired=0 blocked=0 retry=1 dead_lettered=1 rejected=0",
	), r.stdout)
}

// A file that starts with a UTF-8 byte order mark (as editors on Windows
// write it) replays its first line too: the mark is not part of the
// event (RFC 8259 §8.1 lets a parser ignore it). Before, the first line
// was rejected ("byte 0xef outside a string"). A mark anywhere else is
// content, and its line is rejected.
func TestReplaySkipsAByteOrderMarkAtTheStart(t *testing.T) {
	t.Parallel()
	events := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(events, []byte("\ufeff"+`{"specversion":"1.0","id":"a","source":"s","type":"t"}`+"\n"+
		"\ufeff"+`{"specversion":"1.0","id":"b","source":"s","type":"t"}`+"\n"), 0o644))
	out := ok(t, "replay", "--db", newDB(t), events)
	require.True(t, strings.HasPrefix(out, `{"source":"s","id":"a","partitionkey":"","objectversion":null,"outcome":"applied","reason":""}`+"\n"), out)
	require.Contains(t, out, " applied=1 ")
	require.Contains(t, out, " rejected=1\n")
}
