package main

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// `seqbox bench agent` (issue 37) prints its one line with every figure,
// and its check says the agent got every event once and in order, on both
// targets and both stores; the figures are not asserted.
func TestBenchAgent(t *testing.T) {
	dbs := map[string]func(*testing.T) string{
		"sqlite":   func(t *testing.T) string { return newDB(t) },
		"postgres": func(t *testing.T) string { return pgtest.URL(t) },
	}
	for store, db := range dbs {
		for _, target := range []string{"serve", "library"} {
			t.Run(store+"/"+target, func(t *testing.T) {
				where := db(t)
				out := ok(t, "bench", "agent", "--db", where, "--target", target, "--keys", "6", "--versions", "3",
					"--latency", "5ms", "--concurrency", "4", "--chain", "5", "--core-messages", "200")
				// DESIGN.md §7's fields first, in its order.
				require.Regexp(t, regexp.MustCompile(`(?m)^agent: store=\S+ target=\S+ keys=\d+ latency_ms=\d+ concurrency=\d+ events_per_s=\S+ `+
					`ideal_per_s=\S+ efficiency=\S+ core_per_s=\S+ ratio_vs_core=\S+ chain_p50_ms=\S+ chain_p99_ms=\S+ busy_errors=\d+ attempts_on_contention=\d+ `), out)
				m := kv(t, out, "agent: ")
				require.Equal(t, store, m["store"])
				require.Equal(t, "3", m["versions"])
				require.Equal(t, target, m["target"])
				require.Equal(t, map[string]string{"serve": "1", "library": "-"}[target], m["post_batch"])
				for _, k := range []string{"events_per_s", "ideal_per_s", "efficiency", "core_per_s", "ratio_vs_core", "chain_p50_ms", "chain_p99_ms"} {
					require.Regexp(t, regexp.MustCompile(`^`+num+`$`), m[k], k)
				}
				require.Equal(t, "0", m["busy_errors"])
				require.Equal(t, "0", m["attempts_on_contention"])
				require.Equal(t, "ok(23_events_once_in_order)", m["check"])
				// The database stays seqbox's (serve's target runs the
				// gateway on it): the same command runs on it again.
				out = ok(t, "bench", "agent", "--db", where, "--target", target, "--keys", "2", "--versions", "1",
					"--chain", "2", "--core-messages", "50")
				require.Equal(t, "ok(4_events_once_in_order)", kv(t, out, "agent: ")["check"])
			})
		}
	}
	// --post-batch N posts serve's events in CloudEvents batches of N
	// (6 keys: batches of 4 and 2 each round), and the check still holds.
	out := ok(t, "bench", "agent", "--db", newDB(t), "--target", "serve", "--keys", "6", "--versions", "3",
		"--concurrency", "4", "--chain", "3", "--core-messages", "100", "--post-batch", "4")
	m := kv(t, out, "agent: ")
	require.Equal(t, "4", m["post_batch"])
	require.Equal(t, "ok(21_events_once_in_order)", m["check"])
	// --timeline adds where the run's time went: the first answers, and
	// a step per later version.
	out = ok(t, "bench", "agent", "--db", newDB(t), "--target", "library", "--keys", "4", "--versions", "3",
		"--latency", "5ms", "--concurrency", "4", "--chain", "2", "--core-messages", "100", "--timeline")
	m = kv(t, out, "agent timeline: ")
	for _, k := range []string{"first_p50_ms", "first_max_ms", "tail_ms"} {
		require.Regexp(t, regexp.MustCompile(`^`+num+`$`), m[k], k)
	}
	for _, k := range []string{"steps_p50_ms", "steps_max_ms"} {
		require.Regexp(t, regexp.MustCompile(`^`+num+`,`+num+`$`), m[k], k)
	}
	// --statements N: where SQLite's writer spent the core's run and the
	// agent run, a summary line and the N longest statements of each.
	out = ok(t, "bench", "agent", "--db", newDB(t), "--target", "library", "--keys", "4", "--versions", "2",
		"--concurrency", "4", "--chain", "2", "--core-messages", "100", "--statements", "3")
	for _, run := range []string{"core", "agent"} {
		m := kv(t, out, "agent statements: run="+run+" ")
		for _, k := range []string{"units", "statements", "commits"} {
			require.Regexp(t, regexp.MustCompile(`^[1-9][0-9]*$`), m[k], run+" "+k)
		}
		for _, k := range []string{"total_ms", "per_unit_ms", "commit_ms"} {
			require.Regexp(t, regexp.MustCompile(`^`+num+`$`), m[k], run+" "+k)
		}
	}
	require.Regexp(t, regexp.MustCompile(`(?m)^agent statements: run=agent units=8 .*\n(  count=[1-9][0-9]* prepares=[0-9]+ total_ms=`+num+` avg_us=`+num+` \S.*\n){3}`), out)
	// --work: what the core's run and the agent run cost the database,
	// per message or event, in counts each store gives; "-" where it
	// gives none (PostgreSQL's statements and blocks need
	// pg_stat_statements in the database, which the tests' server lacks).
	for store, db := range dbs {
		out = ok(t, "bench", "agent", "--db", db(t), "--target", "library", "--keys", "4", "--versions", "2",
			"--concurrency", "4", "--chain", "2", "--core-messages", "100", "--work")
		for _, run := range []string{"core", "agent"} {
			m := kv(t, out, "agent work: run="+run+" ")
			require.Equal(t, map[string]string{"core": "100", "agent": "8"}[run], m["units"], store+" "+run)
			// Within what a message or an event of such a short run can
			// cost. PostgreSQL's counts are the server's, which other
			// tests write to meanwhile: no bound there.
			bounded := map[string]float64{"commits_per_unit": math.Inf(1), "wal_bytes_per_unit": math.Inf(1)}
			absent := []string{"write_bytes_per_unit"}
			if store == "sqlite" {
				bounded = map[string]float64{"commits_per_unit": 20, "statements_per_unit": 200}
				absent = []string{"blocks_per_unit", "wal_bytes_per_unit"}
				// Linux counts the bytes of files with a device under
				// them: "-" elsewhere, and on tmpfs.
				require.Regexp(t, regexp.MustCompile(`^(-|[0-9]+\.[0-9]{2})$`), m["write_bytes_per_unit"], store+" "+run)
			}
			for k, most := range bounded {
				require.Regexp(t, regexp.MustCompile(`^[0-9]+\.[0-9]{2}$`), m[k], store+" "+run+" "+k)
				v, err := strconv.ParseFloat(m[k], 64)
				require.NoError(t, err)
				require.True(t, v > 0 && v < most, "%s %s %s=%v", store, run, k, v)
			}
			for _, k := range absent {
				require.Equal(t, "-", m[k], store+" "+run+" "+k)
			}
		}
	}
	// --pages N (SQLite): the core's run's and the agent run's WAL frames
	// by table and index, the N that took most of each; the inbox is
	// among the trees every message and event writes, the ledger's table
	// among the agent's only.
	out = ok(t, "bench", "agent", "--db", newDB(t), "--target", "library", "--keys", "20", "--versions", "2",
		"--concurrency", "4", "--chain", "2", "--core-messages", "100", "--pages", "40")
	for run, units := range map[string]string{"core": "100", "agent": "40"} {
		m := kv(t, out, "agent pages: run="+run+" ")
		require.Equal(t, units, m["units"], run)
		require.Regexp(t, regexp.MustCompile(`^[1-9][0-9]*$`), m["frames"], run)
		require.Regexp(t, regexp.MustCompile(`^`+num+`$`), m["commits_per_unit"], run)
		require.NotEqual(t, "0.00", m["commits_per_unit"], run)
	}
	core, agent, found := strings.Cut(out, "agent pages: run=agent ")
	require.True(t, found)
	tree := func(name string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^  frames=[1-9][0-9]* per_unit=` + num + ` ` + name + `$`)
	}
	require.Regexp(t, tree("seqbox_inbox"), core)
	require.NotRegexp(t, tree("seqbox_effects"), core)
	require.Regexp(t, tree("seqbox_inbox"), agent)
	require.Regexp(t, tree("seqbox_effects"), agent)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pages", "-2"}, "seqbox: bench agent: --pages -2: must not be negative"},
		{[]string{"--pages", "2", "--db", "file::memory:"}, "seqbox: bench agent: pages: file::memory: is in memory: the WAL of a database file is counted"},
		{[]string{"--pages", "2", "--db", "mysql://x/y"}, `seqbox: bench agent: pages: sqlite: mysql://x/y: unsupported scheme "mysql": seqbox stores are a SQLite file path or a postgres:// URL`},
		{[]string{"--pages", "5", "--db", "postgres://nowhere/x"}, "seqbox: bench agent: --pages: SQLite only (on PostgreSQL, --work gives the WAL's bytes)"},
		{[]string{"--statements", "2", "--work"}, "seqbox: bench agent: --statements and --work: one at a time (--work counts what --statements times)"},
		{[]string{"--statements", "-1"}, "seqbox: bench agent: --statements -1: must not be negative"},
		{[]string{"--statements", "2", "--db", "postgres://nowhere/x"}, "seqbox: bench agent: --statements: SQLite only (on PostgreSQL, pg_stat_statements tells the same)"},
		{[]string{"--keys", "0"}, "seqbox: bench agent: --keys 0: must be at least 1"},
		// Counts a run would hold in memory: refused, not a crash.
		{[]string{"--keys", "2000000000"}, "seqbox: bench agent: --keys 2000000000: at most 1000000 (a run holds them in memory)"},
		{[]string{"--keys", "2000", "--versions", "1000"}, "seqbox: bench agent: --keys 2000 x --versions 1000: at most 1000000 events (a run holds them in memory)"},
		{[]string{"--chain", "2000000000"}, "seqbox: bench agent: --chain 2000000000: at most 100000 (a run holds them in memory)"},
		{[]string{"--core-messages", "2000000000"}, "seqbox: bench agent: --core-messages 2000000000: at most 10000000 (a run holds them in memory)"},
		{[]string{"--post-batch", "0"}, "seqbox: bench agent: --post-batch 0: must be at least 1"},
		{[]string{"--post-batch", "3", "--target", "library"}, "seqbox: bench agent: --post-batch 3: --target serve only (the library publishes a round's events in one batch)"},
		{[]string{"--post-batch", "1001"}, "seqbox: bench agent: --post-batch 1001: at most 1000, seqbox serve's --max-batch"},
		{[]string{"--target", "nope"}, `seqbox: bench agent: --target "nope": want serve or library`},
		{[]string{"--latency", "-1s"}, "seqbox: bench agent: --latency -1s: must not be negative"},
	} {
		require.Equal(t, tc.want, fails(t, append([]string{"bench", "agent"}, tc.args...)...))
	}
}
