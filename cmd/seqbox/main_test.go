package main

// The tests in this package drive the seqbox binary as a user would: built
// once in TestMain, run as a child process on real files, with its stdout,
// stderr and exit status checked exactly.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/clitest"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// bin is the seqbox binary under test.
var bin string

func TestMain(m *testing.M) {
	os.Exit(clitest.Run(m, "seqbox", &bin, func() error {
		// The Pub/Sub client's OpenCensus dependency starts a view worker
		// in a package init that nothing can stop.
		if err := goleak.Find(goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start")); err != nil {
			return fmt.Errorf("goleak: %w", err)
		}
		return nil
	}))
}

// result is what one run of the binary produced.
type result struct {
	stdout, stderr string
	code           int
}

// exe runs seqbox with args and stdin, without judging the result.
func exe(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = environ()
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(stdin)
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

// environ is the test process's environment without the variable that
// would inject crashes into the child.
func environ() []string { return clitest.Environ() }

// ok runs seqbox, requires success with nothing on stderr, and returns
// stdout.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	r := exe(t, "", args...)
	require.Equal(t, 0, r.code, "seqbox %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	require.Empty(t, r.stderr, "seqbox %s", strings.Join(args, " "))
	return r.stdout
}

// failedAgain runs a redrive whose message fails again: it requires exit
// status 1 and one stderr line naming its dead letter (still dlq seq),
// and returns the results printed on stdout.
func failedAgain(t *testing.T, seq string, args ...string) string {
	t.Helper()
	r := exe(t, "", args...)
	require.Equal(t, 1, r.code, "seqbox %s: stderr %q", strings.Join(args, " "), r.stderr)
	require.Regexp(t, `^seqbox: dlq redrive: source=".*" id=".*" failed again and is dead-lettered \(still dlq `+seq+`\): .*\n$`, r.stderr)
	return r.stdout
}

// fails runs seqbox, requires a non-zero exit with nothing on stdout and
// exactly one line on stderr, and returns that line without its newline.
func fails(t *testing.T, args ...string) string {
	t.Helper()
	r := exe(t, "", args...)
	require.NotEqual(t, 0, r.code, "seqbox %s: expected failure, stdout %q", strings.Join(args, " "), r.stdout)
	require.Empty(t, r.stdout, "seqbox %s", strings.Join(args, " "))
	require.True(t, strings.HasSuffix(r.stderr, "\n") && strings.Count(r.stderr, "\n") == 1,
		"seqbox %s: stderr must be one line, got %q", strings.Join(args, " "), r.stderr)
	line := strings.TrimSuffix(r.stderr, "\n")
	require.True(t, strings.HasPrefix(line, "seqbox: "), "stderr %q", line)
	return line
}

// fixture is the absolute path of a file under testdata.
func fixture(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	require.NoError(t, err)
	_, err = os.Stat(p)
	require.NoError(t, err)
	return p
}

// newDB is the path of a database file that does not exist yet.
func newDB(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "seqbox.db")
}

// lines joins lines with a newline after each, as the binary prints them.
func lines(ls ...string) string {
	if len(ls) == 0 {
		return ""
	}
	return strings.Join(ls, "\n") + "\n"
}

// fixtureLine is line n (1-based) of a testdata file, without its newline.
func fixtureLine(t *testing.T, name string, n int) string {
	t.Helper()
	b, err := os.ReadFile(fixture(t, name))
	require.NoError(t, err)
	ls := strings.Split(string(b), "\n")
	require.Greater(t, len(ls), n-1)
	return ls[n-1]
}
