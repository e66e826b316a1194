package chaos_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/chaos"
	"github.com/seqbox/seqbox/internal/nodetest"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// runSDKAgent runs the serve target with an SDK's example agent (name,
// a key of chaos.SDKAgents, its command cmd), bounded, on db, and
// requires the scenario to pass with kills dealt from a budget of three:
// the agent SIGKILLed at random and right after a tool call, a serve at
// random.
func runSDKAgent(t *testing.T, db, name string, cmd []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := chaos.RunServeAgent(ctx, chaos.Options{Self: self, DB: db, Messages: 120, Keys: 8, Kills: 3, Seed: 5,
		AgentName: name, AgentCmd: cmd, Timeout: 4 * time.Minute})
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

// needPython finds python3 for the Python SDK's example agent.
func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Python agent's chaos needs python3: %v", err)
		}
		t.Skipf("the Python agent's chaos needs python3 (CI fails here instead): %v", err)
	}
}

// The Python SDK's example agent under chaos, on SQLite and PostgreSQL.
func TestServeTargetPythonAgentSQLite(t *testing.T) {
	needPython(t)
	runSDKAgent(t, "", "python", chaos.SDKAgents["python"])
}

func TestServeTargetPythonAgentPostgres(t *testing.T) {
	needPython(t)
	runSDKAgent(t, pgtest.URL(t), "python", chaos.SDKAgents["python"])
}

// typeScriptAgent compiles the TypeScript SDK into a directory of the
// test's (its dependencies installed first when missing) and returns the
// example agent's command there.
func typeScriptAgent(t *testing.T) []string {
	t.Helper()
	nodetest.Need(t, "the TypeScript agent's chaos")
	sdk := filepath.Join("..", "..", "sdk", "typescript")
	nodetest.Install(t, sdk)
	out := t.TempDir()
	nodetest.Compile(t, sdk, out)
	cmd := slices.Clone(chaos.SDKAgents["typescript"])
	cmd[1] = filepath.Join(out, "examples", "refund-agent.js")
	return cmd
}

// The TypeScript SDK's example agent under chaos, on SQLite and
// PostgreSQL.
func TestServeTargetTypeScriptAgentSQLite(t *testing.T) {
	runSDKAgent(t, "", "typescript", typeScriptAgent(t))
}

func TestServeTargetTypeScriptAgentPostgres(t *testing.T) {
	db := pgtest.URL(t)
	runSDKAgent(t, db, "typescript", typeScriptAgent(t))
}
