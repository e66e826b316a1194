package chaos_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/chaos"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/shorttest"
	"github.com/stretchr/testify/require"
)

// self is the seqbox binary the serve target starts, built once.
var self string

// selfEnv hands self to the package's internal tests (stacks_test.go).
const selfEnv = "SEQBOX_CHAOS_TEST_SELF"

func TestMain(m *testing.M) {
	if shorttest.SkipMain("the chaos suite") {
		return
	}
	dir, err := os.MkdirTemp("", "seqbox-chaos-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	self = filepath.Join(dir, "seqbox")
	// The package's own tests (package chaos) find it here.
	os.Setenv(selfEnv, self)
	build := exec.Command("go", "build", "-o", self, "github.com/seqbox/seqbox/cmd/seqbox")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	code := 1
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build seqbox:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// runServe runs the serve target, bounded, with seed 5, and requires every
// scenario to pass; it returns the table.
func runServe(t *testing.T, db string, scenarios ...string) string {
	t.Helper()
	return runServeSeed(t, db, 5, scenarios...)
}

// runServeSeed is runServe with the workload's seed.
func runServeSeed(t *testing.T, db string, seed uint64, scenarios ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var log strings.Builder
	var ended []string // OnResult's calls, one as each scenario ends
	res, err := chaos.RunServe(ctx, chaos.Options{Self: self, DB: db, Messages: 120, Keys: 6, Kills: 2, Seed: seed,
		Scenarios: scenarios, Timeout: 4 * time.Minute, OnResult: func(r chaos.Result) { ended = append(ended, r.Scenario) }})
	failed := chaos.WriteTable(&log, res)
	t.Log("\n" + log.String())
	require.NoError(t, err)
	require.Zero(t, failed)
	require.Len(t, res, len(scenarios))
	require.Equal(t, scenarios, ended, "each scenario's result is handed over as it ends")
	for _, r := range res {
		// 120 events, 10 racing ids and 10 business-key pairs; the
		// dropped-message scenario drops two.
		want := 140
		if r.Scenario == "dropped-message" {
			want = 138
		}
		require.Equal(t, want, r.ExpectedEffects, r.Scenario)
		require.Equal(t, r.ExpectedEffects, r.ActualEffects, r.Scenario)
		require.Positive(t, r.Kills, "%s dealt no kill", r.Scenario)
	}
	return log.String()
}

// The harness over the gateway (docs/design.md §10.5), bounded: two competing serve
// processes on one SQLite file, a faulty agent, SIGKILLs at random and at
// the agent path's fault points; the oracle reads the agent's side.
func TestServeTargetSQLite(t *testing.T) {
	runServe(t, "", "random", "fault:after_decision_claim", "fault:after_agent_answer", "fault:during_redrive")
}

// The same on PostgreSQL.
func TestServeTargetPostgres(t *testing.T) {
	runServe(t, pgtest.BaseURL(t), "random", "fault:after_ledger_pending")
}

// The workloads of issue 36 (serve_workloads.go), bounded, on SQLite: a
// Retry-After storm, a lying HEAD probe and a dropped message, with
// racing copies and cross-key business-key pairs in each.
func TestServeTargetWorkloadsSQLite(t *testing.T) {
	runServe(t, "", "retry-after-storm", "lying-head", "dropped-message")
}

// The same on PostgreSQL, where a business key checked by a read raced
// (issue 36, class 1).
func TestServeTargetWorkloadsPostgres(t *testing.T) {
	runServe(t, pgtest.BaseURL(t), "retry-after-storm", "lying-head", "dropped-message")
}

// The Retry-After storm with another workload and other kills (SQLite; 20
// s more). Its oracle once blamed refusals for the waits that SIGKILLs
// cause (a dead process's decision claims) at about one seed in three;
// seed 6 failed so at a larger size, before the oracle's fix
// (TestStormOracleBlamesOnlyWhatWasReady).
func TestServeTargetStormOtherSeed(t *testing.T) {
	runServeSeed(t, "", 6, "retry-after-storm")
}

func TestServeTargetRefusesUnknownScenarios(t *testing.T) {
	_, err := chaos.RunServe(context.Background(), chaos.Options{Self: self, Messages: 100, Keys: 5, Scenarios: []string{"pg-restart"}})
	require.ErrorContains(t, err, `unknown scenario "pg-restart" for --target serve`)
}
