package main

import (
	"os"
	"path/filepath"
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
// outcome of DESIGN §2: the clock and max age make d1 expired, two
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
		`{"source":"shop","id":"a1","partitionkey":"A","objectversion":1,"outcome":"applied"}`,
		`{"source":"shop","id":"a1","partitionkey":"A","objectversion":1,"outcome":"duplicate"}`,
		`{"source":"shop","id":"a1","partitionkey":"A","objectversion":1,"outcome":"collision"}`,
		`{"source":"shop","id":"b5","partitionkey":"B","objectversion":5,"outcome":"applied"}`,
		`{"source":"shop","id":"c1","partitionkey":"C","objectversion":1,"outcome":"semantic_duplicate"}`,
		`{"source":"shop","id":"a3","partitionkey":"A","objectversion":3,"outcome":"held"}`,
		`{"source":"shop","id":"a2","partitionkey":"A","objectversion":2,"outcome":"applied"}`,
		// The held a3 is released by a2 and prints a second line.
		`{"source":"shop","id":"a3","partitionkey":"A","objectversion":3,"outcome":"applied"}`,
		// A malformed line is an outcome, and replay goes on.
		`{"source":"","id":"","partitionkey":"","objectversion":null,"outcome":"rejected"}`,
		`{"source":"shop","id":"a1-late","partitionkey":"A","objectversion":1,"outcome":"stale"}`,
		`{"source":"shop","id":"a3-again","partitionkey":"A","objectversion":3,"outcome":"version_conflict"}`,
		`{"source":"shop","id":"d1","partitionkey":"D","objectversion":1,"outcome":"expired"}`,
		`{"source":"shop","id":"e1","partitionkey":"E","objectversion":1,"outcome":"retry"}`,
		`{"source":"shop","id":"e1","partitionkey":"E","objectversion":1,"outcome":"dead_lettered"}`,
		`{"source":"shop","id":"e2","partitionkey":"E","objectversion":2,"outcome":"blocked"}`,
		"deliveries=14 accepted=4 duplicates=1 inbox_rows=10 business_effects=4 applied=4 duplicate=1 collision=1 "+
			"semantic_duplicate=1 stale=1 version_conflict=1 held=1 expired=1 blocked=1 retry=1 dead_lettered=1 rejected=1",
	), out)

	// The same file again on the same database applies nothing: every
	// identity is a duplicate; the collision still collides and the
	// malformed line is still rejected.
	out = ok(t, outcomesArgs(t, db, "--state")...)
	require.Equal(t, lines(
		`{"source":"shop","id":"a1","partitionkey":"A","objectversion":1,"outcome":"duplicate"}`,
		`{"source":"shop","id":"a1","partitionkey":"A","objectversion":1,"outcome":"duplicate"}`,
		`{"source":"shop","id":"a1","partitionkey":"A","objectversion":1,"outcome":"collision"}`,
		`{"source":"shop","id":"b5","partitionkey":"B","objectversion":5,"outcome":"duplicate"}`,
		`{"source":"shop","id":"c1","partitionkey":"C","objectversion":1,"outcome":"duplicate"}`,
		`{"source":"shop","id":"a3","partitionkey":"A","objectversion":3,"outcome":"duplicate"}`,
		`{"source":"shop","id":"a2","partitionkey":"A","objectversion":2,"outcome":"duplicate"}`,
		`{"source":"","id":"","partitionkey":"","objectversion":null,"outcome":"rejected"}`,
		`{"source":"shop","id":"a1-late","partitionkey":"A","objectversion":1,"outcome":"duplicate"}`,
		`{"source":"shop","id":"a3-again","partitionkey":"A","objectversion":3,"outcome":"duplicate"}`,
		`{"source":"shop","id":"d1","partitionkey":"D","objectversion":1,"outcome":"duplicate"}`,
		`{"source":"shop","id":"e1","partitionkey":"E","objectversion":1,"outcome":"duplicate"}`,
		`{"source":"shop","id":"e2","partitionkey":"E","objectversion":2,"outcome":"duplicate"}`,
		"deliveries=13 accepted=0 duplicates=11 inbox_rows=10 business_effects=4 applied=0 duplicate=11 collision=1 "+
			"semantic_duplicate=0 stale=0 version_conflict=0 held=0 expired=0 blocked=0 retry=0 dead_lettered=0 rejected=1",
		// --state: one line per key after the counters.
		`{"partitionkey":"A","version":3,"state":"order.shipped","blocked":false,"held":0}`,
		`{"partitionkey":"B","version":5,"state":"followup.requested","blocked":false,"held":0}`,
		`{"partitionkey":"C","version":1,"state":"","blocked":false,"held":0}`,
		`{"partitionkey":"D","version":null,"state":"","blocked":false,"held":0}`,
		`{"partitionkey":"E","version":null,"state":"","blocked":true,"held":0}`,
	), out)
}

func TestReplayStdinAndTemporaryDB(t *testing.T) {
	t.Parallel()
	in, err := os.ReadFile(fixture(t, "gap.jsonl"))
	require.NoError(t, err)
	r := exe(t, string(in), "replay", "--now", now, "--state", "-")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.Equal(t, lines(
		`{"source":"crm","id":"k3-v1","partitionkey":"K3","objectversion":1,"outcome":"applied"}`,
		`{"source":"crm","id":"k3-v3","partitionkey":"K3","objectversion":3,"outcome":"held"}`,
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
