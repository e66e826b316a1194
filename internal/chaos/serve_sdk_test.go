package chaos_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/chaos"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// runSDKAgent runs the serve target with the Python SDK's example agent,
// bounded, on db, and requires the scenario to pass with kills
// dealt from a budget of three: the agent SIGKILLed at random and right
// after a tool call, a serve at random.
func runSDKAgent(t *testing.T, db string) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Python agent's chaos needs python3: %v", err)
		}
		t.Skipf("the Python agent's chaos needs python3 (CI fails here instead): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := chaos.RunServeAgent(ctx, chaos.Options{Self: self, DB: db, Messages: 120, Keys: 8, Kills: 3, Seed: 5,
		AgentName: "python", AgentCmd: chaos.SDKAgents["python"], Timeout: 4 * time.Minute})
	var table strings.Builder
	failed := chaos.WriteTable(&table, res)
	t.Log("\n" + table.String())
	require.NoError(t, err)
	require.Zero(t, failed)
	require.Len(t, res, 1)
	require.Positive(t, res[0].Kills, "no kill was dealt")
	// 120 events: an email each, a refund for the three in four whose
	// amount is not 0.
	require.Equal(t, 210, res[0].ExpectedEffects)
	require.Equal(t, 210, res[0].ActualEffects)
	require.Contains(t, res[0].Note, "steps=120")
}

// The Python SDK's example agent under chaos, on SQLite and PostgreSQL.
func TestServeTargetPythonAgentSQLite(t *testing.T) { runSDKAgent(t, "") }

func TestServeTargetPythonAgentPostgres(t *testing.T) { runSDKAgent(t, pgtest.URL(t)) }
