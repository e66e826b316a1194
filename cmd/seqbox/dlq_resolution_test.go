package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// These tests pin how operator actions settle DLQ rows and keys: a row is
// resolved once its message is no longer dead-lettered, and only the row
// the operator named is resolved.

// openDLQ decodes `dlq list --json` (or --all) into seq → resolution.
func openDLQ(t *testing.T, args ...string) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for _, l := range strings.Split(strings.TrimSuffix(ok(t, args...), "\n"), "\n") {
		if l == "" {
			continue
		}
		var row struct {
			Seq        int64  `json:"seq"`
			Resolution string `json:"resolution"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &row), l)
		out[row.Seq] = row.Resolution
	}
	return out
}

// A redrive settles the message even when it does not apply: with
// --on-dead-letter release the key moved past v2, so the redriven v2 is
// stale (recorded, never retried). It is no longer dead-lettered, so its
// DLQ row must not stay open to be redriven again and again. The redrive
// takes the release policy from the consumer's registration.
func TestDLQRedriveThatEndsStaleResolvesTheRow(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	out := ok(t, "replay", "--db", db, "--now", now, "--on-dead-letter", "release", fixture(t, "k2.jsonl"))
	require.Contains(t, out, `{"source":"crm","id":"k2-v3","partitionkey":"K2","objectversion":3,"outcome":"applied","reason":""}`+"\n")

	require.Equal(t, lines(
		`{"source":"crm","id":"k2-v2","partitionkey":"K2","objectversion":2,"outcome":"stale",`+
			`"reason":"version 2 is older than the committed version 3"}`,
	), ok(t, "dlq", "redrive", "--output", "jsonl", "1", "--db", db))

	require.Empty(t, openDLQ(t, "dlq", "list", "--db", db, "--json"),
		"the redriven message ended stale; its DLQ row must be resolved")
	all := openDLQ(t, "dlq", "list", "--all", "--db", db, "--json")
	require.True(t, strings.HasPrefix(all[1], "redriven"), "resolution %q", all[1])
}

// Envelopes rejected before they had an identity share the empty
// identity; redriving or skipping one of them must leave the others open.
func TestDLQResolvingOneRejectedEnvelopeLeavesTheOthersOpen(t *testing.T) {
	t.Parallel()
	replayRejected := func(t *testing.T) string {
		db := newDB(t)
		out := ok(t, "replay", "--db", db, "--now", now, fixture(t, "rejected.jsonl"))
		require.True(t, strings.HasPrefix(out, lines(
			`{"source":"","id":"","partitionkey":"","objectversion":null,"outcome":"rejected",`+
				`"reason":"invalid event: envelope: not a JSON object: invalid character 'o' in literal null (expecting 'u') (at byte 1)"}`,
			`{"source":"","id":"","partitionkey":"","objectversion":null,"outcome":"rejected",`+
				`"reason":"invalid event: id: required attribute is missing"}`,
		)), out)
		require.Equal(t, map[int64]string{1: "", 2: ""}, openDLQ(t, "dlq", "list", "--db", db, "--json"))
		return db
	}

	t.Run("skip", func(t *testing.T) {
		t.Parallel()
		db := replayRejected(t)
		require.Empty(t, ok(t, "dlq", "skip", "--output", "jsonl", "1", "--db", db, "--by", "ops", "--reason", "junk"))
		require.Equal(t, map[int64]string{2: ""}, openDLQ(t, "dlq", "list", "--db", db, "--json"),
			"skipping dlq 1 must leave dlq 2 open")
	})
	t.Run("redrive", func(t *testing.T) {
		t.Parallel()
		db := replayRejected(t)
		// Rejected again is dead-lettered again: the command says so and
		// exits 1, as for any redrive that fails again.
		require.Equal(t, lines(`{"source":"","id":"","partitionkey":"","objectversion":null,"outcome":"rejected",`+
			`"reason":"invalid event: envelope: not a JSON object: invalid character 'o' in literal null (expecting 'u') (at byte 1)"}`),
			failedAgain(t, "1", "dlq", "redrive", "--output", "jsonl", "1", "--db", db))
		// Row 1 took the failure and keeps its number (DESIGN.md §7: a
		// dead letter keeps its number across redrives); row 2 was not
		// touched and stays open.
		require.Equal(t, map[int64]string{1: "", 2: ""}, openDLQ(t, "dlq", "list", "--db", db, "--json"),
			"redriving dlq 1 must leave dlq 2 open, and dlq 1 under its number")
		require.Contains(t, ok(t, "dlq", "show", "1", "--db", db), "failed again after a redrive")
	})
}

// A redrive that fails again leaves the key blocked without a moment of
// release in between: the key has been stuck since the first failure, and
// the stuck-keys view (and MaxBlock) must keep counting from there.
func TestKeysFailedRedriveKeepsBlockedSince(t *testing.T) {
	t.Parallel()
	db := replayK2(t)
	require.Equal(t, lines(
		`{"source":"crm","id":"k2-v2","partitionkey":"K2","objectversion":2,"outcome":"dead_lettered",`+
			`"reason":"permanent failure: permanent: record: data.fail=permanent"}`,
	), failedAgain(t, "1", "dlq", "redrive", "--output", "jsonl", "1", "--db", db))
	reps := keyReports(t, "keys", "list", "--db", db, "--json")
	require.Len(t, reps, 1)
	require.Equal(t, true, reps[0]["blocked"])
	require.Equal(t, "2026-01-02T03:04:05Z", reps[0]["since"], "blocked since the first failure, not the failed redrive")
}
