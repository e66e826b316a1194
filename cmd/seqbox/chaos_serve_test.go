package main

import (
	"testing"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// The harness over the gateway (DESIGN §7), bounded: two competing serve
// processes on one SQLite file, a faulty agent, and SIGKILLs at random and
// at every fault point of the agent path; the oracle reads the agent's
// side.
func TestChaosServeSQLite(t *testing.T) {
	out := runChaos(t, "--target", "serve", "--messages", "150", "--keys", "8", "--kills", "2", "--seed", "5")
	require.Contains(t, out, "chaos: 5 scenarios passed, 0 failed")
	for _, s := range []string{"random", "fault:after_decision_claim", "fault:after_ledger_pending", "fault:after_agent_answer", "fault:during_redrive"} {
		require.Regexp(t, `(?m)^`+s+` .* PASS `, out)
	}
}

// The same on PostgreSQL.
func TestChaosServePostgres(t *testing.T) {
	url := pgtest.BaseURL(t)
	out := runChaos(t, "--target", "serve", "--db", url, "--messages", "150", "--keys", "8", "--kills", "2", "--seed", "5",
		"--scenarios", "random,fault:after_ledger_pending")
	require.Contains(t, out, "chaos: 2 scenarios passed, 0 failed")
}

func TestChaosUnknownTarget(t *testing.T) {
	line := fails(t, "chaos", "--target", "agent")
	require.Contains(t, line, `--target "agent": not consumer or serve`)
}
