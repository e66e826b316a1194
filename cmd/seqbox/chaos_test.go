package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// runChaos runs a bounded `seqbox chaos` and returns its table.
func runChaos(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"chaos"}, args...)...)
	cmd.Env = environ()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	t.Logf("seqbox chaos %s\n%s", strings.Join(args, " "), out.String())
	require.NoError(t, err, "stderr: %s", errOut.String())
	return out.String()
}

// The bounded chaos run of issue 4: every scenario on SQLite, consumers
// SIGKILLed at random and at each fault point, verified against the oracle.
func TestChaosSQLite(t *testing.T) {
	out := runChaos(t, "--messages", "300", "--keys", "15", "--kills", "3", "--seed", "7")
	require.Contains(t, out, "chaos: 12 scenarios passed, 0 failed")
	for _, s := range []string{"random", "fault:after_commit_before_ack", "fault:during_purge", "sqlite-checkpoint", "sqlite-disk-full"} {
		require.Regexp(t, `(?m)^`+s+` .* PASS `, out)
	}
}

// The same harness on PostgreSQL, including a server restart with
// pg_ctl stop -m immediate in the middle of the run.
func TestChaosPostgres(t *testing.T) {
	url := pgtest.BaseURL(t)
	if os.Getenv("SEQBOX_TEST_POSTGRES_DATA") == "" || os.Getenv("SEQBOX_TEST_POSTGRES_BIN") == "" {
		t.Fatalf("SEQBOX_TEST_POSTGRES_DATA/BIN are not set: .ci/postgres-start exports them for the pg-restart scenario")
	}
	out := runChaos(t, "--db", url, "--messages", "300", "--keys", "15", "--kills", "3", "--seed", "7",
		"--scenarios", "random,fault:after_inbox_insert,fault:after_commit_before_ack,pg-restart")
	require.Contains(t, out, "chaos: 4 scenarios passed, 0 failed")
	require.Regexp(t, `(?m)^pg-restart .* PASS `, out)
}
