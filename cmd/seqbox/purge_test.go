package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Identities recorded long ago (replay --now in the past) are past their
// retention: purge removes them, and a second purge finds nothing.
func TestPurge(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	file := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(`{"specversion":"1.0","id":"a","source":"s","type":"t"}
{"specversion":"1.0","id":"b","source":"s","type":"t"}
`), 0o644))
	ok(t, "replay", "--db", db, "--now", "2020-01-02T03:04:05Z", file)
	require.Regexp(t, `^purged=2 consumer=\S+ retention=\S+\n$`, ok(t, "purge", "--db", db))
	require.Regexp(t, `^purged=0 `, ok(t, "purge", "--db", db))
	require.Contains(t, fails(t, "purge"), "--db is required")
	require.Contains(t, fails(t, "purge", "--db", db, "--batch", "0"), "--batch 0")
	require.Contains(t, fails(t, "purge", "--db", db, "--consumer", "nobody"), `--consumer "nobody"`)
}
