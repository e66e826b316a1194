package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A flag that replay or serve refuses is refused before the database is
// opened: no file is created, and nothing is migrated into one. Before,
// the consumer's settings were checked only once the store was open, and
// each of these left a fresh seqbox database behind.
func TestRefusedFlagsLeaveNoDatabase(t *testing.T) {
	t.Parallel()
	events := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(events, []byte(`{"specversion":"1.0","id":"a","source":"s","type":"t"}`+"\n"), 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--gap-policy", "bogus", events}, "GapPolicy"},
		{[]string{"replay", "--gap-policy", "", events}, "--gap-policy"},
		{[]string{"replay", "--on-dead-letter", "bogus", events}, "OnDeadLetter"},
		{[]string{"replay", "--hold-expiry", "bogus", events}, "HoldExpiry"},
		{[]string{"replay", "--consumer", "", events}, "Name"},
		{[]string{"replay", "--now", "", events}, `--now "": not an RFC 3339 time`},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--retry-backoff", "10m"}, "Retry.InitialBackoff"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--gap-policy", "nope"}, "GapPolicy"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--retention", "1h"}, "Retention"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--workers", "-1"}, "Workers"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--batch-size", "-5"}, "BatchSize"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--max-body", "-1"}, "--max-body"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--max-body", "0"}, "--max-body"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--max-batch", "0"}, "--max-batch"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--max-batch", "-5"}, "--max-batch -5: at least 1 event"},
		{[]string{"serve", "--addr", "127.0.0.1:99999"}, "99999"},
		// A zero given where the default is not zero: serve used to run
		// with the default, where replay refuses the same value.
		{[]string{"serve", "--addr", "127.0.0.1:0", "--max-attempts", "0"}, "--max-attempts 0: must be more than 0 (leave the flag out for the default, 5)"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--hold-timeout", "0"}, "--hold-timeout 0s: must be more than 0"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--consumer", ""}, `--consumer '': give one, or leave the flag out for "gateway"`},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--lease", "0s"}, "--lease 0s: must be more than 0"},
		// A consumer named "0" is a name, not a zero: refused only by a
		// flag that cannot be had.
		{[]string{"serve", "--addr", "127.0.0.1:99999", "--consumer", "0", "--queue", "0"}, "99999"},
	} {
		t.Run(strings.ReplaceAll(strings.Join(c.args, " "), events, "FILE"), func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "fresh.db")
			r := exe(t, "", append(c.args, "--db", db)...)
			require.NotEqual(t, 0, r.code, "stdout %q", r.stdout)
			require.Contains(t, r.stderr, c.want)
			left, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, left, "a refused command left files behind")
		})
	}
}
