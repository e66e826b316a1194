package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// counters returns the last line a command printed as its key=value
// counters.
func counters(t *testing.T, out string) map[string]int {
	t.Helper()
	ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	m := map[string]int{}
	for _, kv := range strings.Fields(ls[len(ls)-1]) {
		var v int
		k, val, ok := strings.Cut(kv, "=")
		require.True(t, ok, "counter %q in %q", kv, ls[len(ls)-1])
		_, err := fmt.Sscan(val, &v)
		require.NoError(t, err, "counter %q", kv)
		m[k] = v
	}
	return m
}

// The external-call lab: a CRM API that creates a task at every request,
// misbehaving on every other call, and a worker killed mid-call. Every
// logical action has exactly one task at the remote side.
func TestDemoExternalCall(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]func(t *testing.T) string{"sqlite": newDB, "postgres": func(t *testing.T) string { return pgtest.URL(t) }} {
		t.Run(name, func(t *testing.T) {
			out := ok(t, "demo", "--scenario", "external-call", "--db", db(t))
			c := counters(t, out)
			require.Equal(t, 10, c["logical_actions"], out)
			require.Equal(t, 10, c["remote_effects"], out)
			require.Zero(t, c["duplicates_at_remote"], out)
			require.GreaterOrEqual(t, c["uncertain"], 4, "dropped, hung, reset and killed calls are uncertain: %s", out)
			require.Equal(t, c["uncertain"], c["reconciled"], out)
			require.Contains(t, out, "killed (SIGKILL)")
		})
	}
}

func TestDemoUnknownScenario(t *testing.T) {
	t.Parallel()
	line := fails(t, "demo", "--scenario", "nope")
	require.Contains(t, line, `--scenario "nope"`)
}

// The agent-decision lab: a random model, a worker killed between Decide
// and COMMIT, decisions outlasting the lease, a redrive. The model answers
// once per message and no decision changes; a call cut off by the SIGKILL
// (the killed worker was also deciding a slow lead) had no answer, and is
// counted apart.
func TestDemoAgentDecision(t *testing.T) {
	t.Parallel()
	out := ok(t, "demo", "--scenario", "agent-decision")
	c := counters(t, out)
	require.Equal(t, 12, c["messages"], out)
	require.Equal(t, 12, c["model_calls"], out)
	require.Equal(t, 12, c["business_effects"], out)
	require.Zero(t, c["decisions_changed_on_redelivery"], out)
	require.Positive(t, c["redeliveries"], out)
	require.Contains(t, out, "died between Decide and COMMIT")
	require.Contains(t, out, "redrive lead-07")
}

// The outbox lab: billing emits through its outbox, the relay publishes,
// the ledger consumes; each is killed at its critical point. Every
// invoice reaches the ledger once, in order per order.
func TestDemoOutbox(t *testing.T) {
	t.Parallel()
	out := ok(t, "demo", "--scenario", "outbox")
	c := counters(t, out)
	require.Equal(t, 30, c["emitted"], out)
	require.Equal(t, 30, c["published_at_least"], out)
	require.Equal(t, 30, c["downstream_applied"], out)
	require.Zero(t, c["order_violations"], out)
	require.Positive(t, c["downstream_duplicates"], "the relay killed after publishing republishes: %s", out)
	require.Contains(t, out, "relay killed at relay_after_publish")
}
