package chaos

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/waitfor"

	"github.com/stretchr/testify/require"
)

// A real SIGQUIT dump of seqbox serve (testdata/sigquit-serve.txt), three
// of its goroutines marked blocked for minutes (one of them twice, as
// goroutine 151 and 9151): the report gives those, by their seqbox
// frames, most frequent first, and nothing blocked for less.
func TestStuckStacksGivesTheGoroutinesBlockedForMinutes(t *testing.T) {
	dump, err := os.ReadFile("testdata/sigquit-serve.txt")
	require.NoError(t, err)
	got := stuckStacks(string(dump), 1<<20)
	t.Log("\n" + got)
	entries := strings.Split(strings.TrimSpace(got), "\n  ×")
	require.Len(t, entries, 3)
	require.True(t, strings.HasPrefix(entries[0], "×2 [select]\n    github.com/seqbox/seqbox.(*Consumer).controlLoop requests.go:116\n"), entries[0])
	require.Contains(t, got, "  ×1 [select]\n    github.com/seqbox/seqbox/internal/serve.(*Server).Serve server.go:248\n")
	require.Contains(t, got, "(*Consumer).maintainLoop maintain.go:53\n")
	require.NotContains(t, got, "extendLoop", "blocked for less than a minute")
	require.NotContains(t, got, "runtime.", "only seqbox's frames")

	capped := stuckStacks(string(dump), 200)
	require.Contains(t, capped, "(more left out)")
	require.LessOrEqual(t, len(capped), 200+len("  (more left out)\n"))
}

// quit ends a real seqbox serve with SIGQUIT and returns the goroutine
// dump it wrote then, and nothing it wrote before.
func TestQuitReturnsTheGoroutineDump(t *testing.T) {
	self := os.Getenv("SEQBOX_CHAOS_TEST_SELF") // set by TestMain (serve_test.go)
	require.NotEmpty(t, self, "TestMain builds seqbox")
	p, err := startCmd(io.Discard, "serve", nil, self, "serve", "--db", filepath.Join(t.TempDir(), "q.db"),
		"--addr", "127.0.0.1:0", "--agent-url", "http://127.0.0.1:9")
	require.NoError(t, err)
	t.Cleanup(p.kill)
	waitfor.That(t, time.Minute, "serve listening", func() bool { return strings.Contains(p.output.String(), "listening on http://") })
	dump := p.quit(30 * time.Second)
	require.True(t, p.exited())
	require.NotContains(t, dump, "listening on http://")
	require.Regexp(t, `(?m)^goroutine 1 .*\[`, dump)
	require.Contains(t, dump, "github.com/seqbox/seqbox/internal/serve.(*Server).Serve(")
	require.Empty(t, p.quit(time.Second), "an exited process writes nothing more")
}

// The kernel's lock table as /proc/locks gives it: the holders of a
// POSIX lock on one inode, not its waiters, not another inode's, not a
// flock.
func TestParseLockHolders(t *testing.T) {
	table := `1: POSIX  ADVISORY  READ 32252 fe:00:10986261 1073741826 1073742335
2: -> POSIX  ADVISORY  WRITE 4000 fe:00:10986261 1073741824 1073741824
3: POSIX  ADVISORY  READ 32236 fe:00:10953011 128 128
4: FLOCK  ADVISORY  WRITE 777 fe:00:10986261 0 EOF
5: POSIX  ADVISORY  WRITE 32210 fe:00:10986261 120 120
`
	require.Equal(t, map[int]bool{32252: true, 32210: true}, parseLockHolders(table, 10986261))
	require.Empty(t, parseLockHolders(table, 1))
}
