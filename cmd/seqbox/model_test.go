package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var modelLast = regexp.MustCompile(`(?m)^model: states=(\d+) depth=(\d+) violations=(\d+)\n\z`)

func TestModelMutantsListsTheKnownWaysToBreakTheProtocol(t *testing.T) {
	out := ok(t, "model", "mutants")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, must := range []string{"ack-before-commit", "no-inbox-insert", "gate-skipped", "turn-ends-on-nack",
		"decide-before-semantic-check", "ledger-no-pending",
		// issue 36, classes 1 to 4
		"business-key-check-unlocked", "decision-not-bound", "turn-not-bound", "turn-without-way-out"} {
		require.Contains(t, lines, must)
	}
	long := ok(t, "model", "mutants", "--long")
	require.Contains(t, long, "ack-before-commit\tthe copy is acknowledged before the transaction commits\n")
}

func TestModelCheckSmallFindsNoViolation(t *testing.T) {
	out := ok(t, "model", "check", "--small")
	m := modelLast.FindStringSubmatch(out)
	require.NotNil(t, m, "last line: %q", out)
	states, _ := strconv.Atoi(m[1])
	require.Greater(t, states, 10_000)
	require.Equal(t, "0", m[3])
	require.NotContains(t, out, "VIOLATION")
}

func TestModelCheckMutantExitsOneWithTheShortestCounterexample(t *testing.T) {
	r := exe(t, "", "model", "check", "--small", "--mutant", "ack-before-commit")
	require.Equal(t, 1, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.Contains(t, r.stdout, "model: VIOLATION: ACK only after COMMIT: a copy of k0/v1 was acknowledged with nothing committed for it\n"+
		"  1. worker 1 receives k0/v1 (copy 1)\n"+
		"  2. worker 1 acknowledges k0/v1 before committing anything\n")
	m := modelLast.FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	require.Equal(t, []string{"2", "1"}, m[2:])
}

func TestModelCheckRefusesBadBounds(t *testing.T) {
	require.Equal(t, `seqbox: model: no mutant "nope" (seqbox model mutants lists them)`, fails(t, "model", "check", "--mutant", "nope"))
	require.Equal(t, "seqbox: model: --keys 0 is out of range 1..3", fails(t, "model", "check", "--keys", "0"))
	require.Equal(t, "seqbox: model check: --small and --large exclude each other", fails(t, "model", "check", "--small", "--large"))
	require.Contains(t, fails(t, "model", "check", "--workers", "x"), `invalid argument "x" for "--workers"`)
	require.Equal(t, "seqbox: model check: --max-states -5 is negative (0 is no limit)", fails(t, "model", "check", "--max-states", "-5"))
}

// Issue 36's four classes: each mutant widens the bounds to what it needs
// (the PostgreSQL store and a business key, a copy with another payload,
// a lost message) and is caught with a counterexample.
func TestModelCheckCatchesEachClassOfIssue36(t *testing.T) {
	for mutant, want := range map[string]string{
		"business-key-check-unlocked": "model: VIOLATION: once at the agent: bk-dup reached the agent while the business key b0 (under k0/v1) was in flight or done there\n",
		"decision-not-bound":          "model: VIOLATION: bound to the payload: k0/v1' applied with the decision made for k0/v1\n",
		"turn-not-bound":              "model: VIOLATION: one identity, one payload at the agent: k0/v1' was sent under the identity whose agent already received k0/v1\n",
		"turn-without-way-out":        "model: VIOLATION: nothing lost: no step is possible, yet k0/v2 has no final outcome\n",
	} {
		r := exe(t, "", "model", "check", "--small", "--mutant", mutant)
		require.Equal(t, 1, r.code, "%s: %s", mutant, r.stderr)
		require.Contains(t, r.stdout, want, mutant)
		require.Regexp(t, modelLast, r.stdout)
	}
}
