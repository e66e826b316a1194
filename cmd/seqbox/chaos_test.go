package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/clitest"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/shorttest"
	"github.com/stretchr/testify/require"
)

// ownPostgres starts a throwaway PostgreSQL cluster on a free loopback
// port with .ci/postgres-start, and stops and removes it at cleanup. It
// returns the URL, the data directory and the bin directory.
func ownPostgres(t *testing.T) (url, data, binDir string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	cmd := exec.Command("bash", "../../.ci/postgres-start")
	cmd.Env = append(os.Environ(), "SEQBOX_PG_PORT="+strconv.Itoa(port))
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	require.NoError(t, err, "postgres-start: %s", errOut.String())
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		vars[k] = v
	}
	url, data, binDir = vars["SEQBOX_TEST_POSTGRES_URL"], vars["SEQBOX_TEST_POSTGRES_DATA"], vars["SEQBOX_TEST_POSTGRES_BIN"]
	require.NotEmpty(t, url, "postgres-start printed: %s", out)
	t.Cleanup(func() {
		stop := []string{filepath.Join(binDir, "pg_ctl"), "-D", data, "stop", "-m", "immediate"}
		if os.Geteuid() == 0 {
			stop = append([]string{"runuser", "-u", "postgres", "--"}, stop...)
		}
		if err := exec.Command(stop[0], stop[1:]...).Run(); err != nil {
			t.Logf("stopping the test's PostgreSQL: %v", err)
		}
		os.RemoveAll(filepath.Dir(data))
	})
	return url, data, binDir
}

// The bounded chaos run of issue 4: every scenario on SQLite, consumers
// SIGKILLed at random and at each fault point, verified against the oracle.
func TestChaosSQLite(t *testing.T) {
	shorttest.Skip(t, "the chaos suite")
	out := clitest.RunChaos(t, bin, "--messages", "300", "--keys", "15", "--kills", "3", "--seed", "7")
	require.Contains(t, out, "chaos: 14 scenarios passed, 0 failed")
	for _, s := range []string{"random", "outbox-chain", "agent-ledger", "fault:after_commit_before_ack", "fault:during_purge", "sqlite-checkpoint", "sqlite-disk-full"} {
		require.Regexp(t, `(?m)^`+s+` .* PASS `, out)
	}
}

// The same harness on PostgreSQL, including a server restart with
// pg_ctl stop -m immediate in the middle of the run.
// The server is one of the test's own: pg-restart stops and restarts it,
// which would break the tests of other packages that run meanwhile on the
// shared one.
func TestChaosPostgres(t *testing.T) {
	shorttest.Skip(t, "the chaos suite")
	pgtest.BaseURL(t) // PostgreSQL is set up (in CI: or the test fails)
	url, data, binDir := ownPostgres(t)
	out := clitest.RunChaos(t, bin, "--db", url, "--pg-data", data, "--pg-bin", binDir, "--messages", "300", "--keys", "15", "--kills", "3", "--seed", "7",
		"--scenarios", "random,outbox-chain,agent-ledger,fault:after_inbox_insert,fault:after_commit_before_ack,pg-restart")
	require.Contains(t, out, "chaos: 6 scenarios passed, 0 failed")
	require.Regexp(t, `(?m)^pg-restart .* PASS `, out)
}

// On a terminal chaos shows a progress line on stderr, rewritten in
// place and erased before each row; script(1) gives it a real one.
// Elsewhere it adds nothing to stderr.
func TestChaosProgressOnATerminal(t *testing.T) {
	shorttest.Skip(t, "the chaos suite")
	if _, err := exec.LookPath("script"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("script (util-linux) is needed for a terminal: %v", err)
		}
		t.Skipf("script (util-linux) is needed for a terminal: %v", err)
	}
	cmd := exec.Command("script", "-qefc", bin+" chaos --messages 60 --keys 5 --kills 2 --seed 3 --scenarios random", "/dev/null")
	cmd.Env = clitest.Environ()
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%q", out)
	text := strings.ReplaceAll(string(out), "\r\n", "\n") // the terminal's line ends
	require.Regexp(t, `\rchaos: scenario 1/1 random, phase 1: [0-9]+ messages pending, [0-9]+ kills, [0-9]+s\x1b\[K`, text)
	// The progress line is erased before the row, which starts a line.
	require.Regexp(t, `\r\x1b\[Krandom +[0-9]+ .* PASS `, text)
	require.Contains(t, text, "chaos: 1 scenario passed, 0 failed")

	// Not on a terminal: the rows on stdout, nothing on stderr.
	r := exe(t, "", "chaos", "--messages", "60", "--keys", "5", "--kills", "2", "--seed", "3", "--scenarios", "random")
	require.Equal(t, 0, r.code, "stderr %q", r.stderr)
	require.Empty(t, r.stderr)
	require.Regexp(t, `(?m)^random +[0-9]+ .* PASS `, r.stdout)
}

func TestChaosUnknownTransport(t *testing.T) {
	line := fails(t, "chaos", "--transport", "rabbitmq")
	require.Contains(t, line, `--transport "rabbitmq": not one of embedded, nats, kafka, sqs, pubsub`)
}

func TestChaosUnknownTarget(t *testing.T) {
	line := fails(t, "chaos", "--target", "agent")
	require.Contains(t, line, `--target "agent": not consumer or serve`)
}

func TestChaosUnknownAgent(t *testing.T) {
	line := fails(t, "chaos", "--target", "serve", "--agent", "cobol")
	require.Contains(t, line, `--agent "cobol": not one of python, typescript (or give --agent-cmd)`)
	line = fails(t, "chaos", "--agent", "python")
	require.Contains(t, line, `--agent python: only with --target serve`)
}

// Options no run can take are refused before anything runs, naming the
// flag; they used to run every scenario (a negative --procs or --lease
// taken as the default, a --db that names no directory failing each
// scenario at its setup) or print the table's header before the error.
func TestChaosBadFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--procs", "-1"}, "seqbox: chaos: --procs -1: at least 1"},
		{[]string{"--procs", "0"}, "seqbox: chaos: --procs 0: at least 1"},
		{[]string{"--lease", "-1s"}, "seqbox: chaos: --lease -1s: must be positive"},
		{[]string{"--timeout", "0"}, "seqbox: chaos: --timeout 0s: must be positive"},
		{[]string{"--agent-cmd", "x"}, "seqbox: chaos: --agent-cmd needs --agent (the SDK agent it replaces)"},
		{[]string{"--db", "http://x"}, "seqbox: chaos: --db http://x: want a postgres:// URL or a directory for the scenarios' SQLite files"},
		{[]string{"--db", file}, "seqbox: chaos: --db " + file + ": want a postgres:// URL or a directory for the scenarios' SQLite files"},
		{[]string{"--messages", "0"}, "seqbox: chaos: --messages 0: at least 10"},
		{[]string{"--kills", "-1"}, "seqbox: chaos: --kills -1: must not be negative"},
	} {
		// fails: one line on stderr, nothing on stdout (no header).
		require.Equal(t, c.want, fails(t, append([]string{"chaos", "--scenarios", "random"}, c.args...)...), "%v", c.args)
	}
}
