package main

import (
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// The bench tests run tiny sizes and check the output's shape and the
// correctness checks, never the speed.

const num = `[0-9]+(?:\.[0-9]+)?`

// kv reads the key=value pairs of the output line that starts with prefix.
func kv(t *testing.T, out, prefix string) map[string]string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			m := map[string]string{}
			for _, f := range strings.Fields(rest) {
				if k, v, ok := strings.Cut(f, "="); ok {
					m[k] = v
				}
			}
			return m
		}
	}
	t.Fatalf("no line starting with %q in:\n%s", prefix, out)
	return nil
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "%q is not an integer", s)
	return n
}

func checkThroughputOutput(t *testing.T, out string) {
	t.Helper()
	t.Logf("\n%s", out)
	require.Regexp(t, `(?m)^seqbox bench throughput  db=\S+ .*messages=300 keys=10 batch=16 workers=2 deliver_messages=30$`, out)
	require.Regexp(t, `(?m)^mode +messages +seconds +msgs/s +p50_ms +p99_ms +max_ms +vs_raw *$`, out)
	for _, row := range []string{"raw-insert +300", "seqbox-run +300", "seqbox-deliver +30"} {
		require.Regexp(t, `(?m)^`+row+`( +`+num+`){6} *$`, out)
	}
	require.Regexp(t, `(?m)^raw-insert .* 1\.000 *$`, out)
	require.Regexp(t, `(?m)^batching: seqbox-run/seqbox-deliver = `+num+`x$`, out)
	check := kv(t, out, "check: ")
	require.Equal(t, map[string]string{"raw_rows": "300", "run_applied": "300", "run_other": "0", "run_effects": "300",
		"queue_left": "0", "deliver_applied": "30", "deliver_effects": "30", "consumer_warnings": "0"}, check)
	require.True(t, strings.HasSuffix(out, " ok\n"), "last line must end in ok")
}

func TestBenchThroughputSQLite(t *testing.T) {
	args := []string{"bench", "throughput", "--messages", "300", "--keys", "10", "--batch", "16", "--workers", "2", "--deliver-messages", "30"}
	checkThroughputOutput(t, ok(t, args...))
	// A second run on the same database sees none of the first run's
	// messages: every check still adds up.
	db := newDB(t)
	checkThroughputOutput(t, ok(t, append(args, "--db", db)...))
	checkThroughputOutput(t, ok(t, append(args, "--db", db)...))
}

func TestBenchThroughputPostgres(t *testing.T) {
	checkThroughputOutput(t, ok(t, "bench", "throughput", "--db", pgtest.URL(t), "--messages", "300", "--keys", "10",
		"--batch", "16", "--workers", "2", "--deliver-messages", "30"))
}

func checkPurgeOutput(t *testing.T, out string) {
	t.Helper()
	t.Logf("\n%s", out)
	require.Regexp(t, `(?m)^seqbox bench purge  db=\S+ .*rows=3000 purge_batch=100 workers=2 consumer_batch=16 keys=10 load=saturated warmup=100ms$`, out)
	require.Regexp(t, `(?m)^seed: 3000 expired identities in `+num+`s \(`+num+` rows/s\), plus 100 expired held`, out)
	require.Regexp(t, `(?m)^window +seconds +applied +msgs/s +p50_ms +p99_ms +max_ms +begin_p99_ms +begin_max_ms *$`, out)
	require.Regexp(t, `(?m)^baseline( +`+num+`){3}( +(`+num+`|-)){5} *$`, out)
	require.Regexp(t, `(?m)^purge( +`+num+`){3}( +(`+num+`|-)){5} *$`, out)
	require.Regexp(t, regexp.MustCompile(`(?m)^during purge vs baseline: throughput x`+num+`, p99 receive→commit x`+num+`$`), out)
	purge := kv(t, out, "purge: ")
	require.Equal(t, "3000", purge["removed"])
	// 3000 rows in batches of 100: 30 full batches and the empty one that
	// ends the purge.
	require.Equal(t, "31", purge["batches"])
	for _, k := range []string{"seconds", "rows/s", "batch_p50_ms", "batch_p99_ms", "batch_max_ms", "first10pct_batch_ms", "last10pct_batch_ms"} {
		require.Regexp(t, `^`+num+`$`, purge[k], k)
	}
	stream := kv(t, out, "live stream: ")
	require.Positive(t, atoi(t, stream["published"]))
	require.Regexp(t, `^[0-9]+$`, stream["publish_failures"])
	check := kv(t, out, "check: ")
	require.Equal(t, "3000", check["removed"])
	require.Equal(t, "3000", check["purgeable_before"])
	require.Equal(t, "0", check["expired_left"])
	require.Equal(t, "0", check["purgeable_left"])
	require.Equal(t, "100/100", check["held_kept"])
	require.Equal(t, "0", check["consumer_warnings"])
	live := atoi(t, check["live_rows"])
	require.Positive(t, live, "the consumer applied live traffic during the run")
	require.Equal(t, live, atoi(t, check["live_applied"]))
	require.Equal(t, live, atoi(t, check["live_effects"]))
	require.True(t, strings.HasSuffix(out, " ok\n"), "last line must end in ok")
}

func TestBenchPurgeSQLite(t *testing.T) {
	args := []string{"bench", "purge", "--rows", "3000", "--batch", "100", "--workers", "2", "--consumer-batch", "16",
		"--keys", "10", "--warmup", "100ms", "--baseline", "300ms"}
	// Twice on one database: the live rows of the first run must survive
	// the second run's purge, which removes exactly its own expired rows.
	db := newDB(t)
	checkPurgeOutput(t, ok(t, append(args, "--db", db)...))
	checkPurgeOutput(t, ok(t, append(args, "--db", db)...))
}

func TestBenchPurgePostgres(t *testing.T) {
	checkPurgeOutput(t, ok(t, "bench", "purge", "--db", pgtest.URL(t), "--rows", "3000", "--batch", "100", "--workers", "2",
		"--consumer-batch", "16", "--keys", "10", "--warmup", "100ms", "--baseline", "300ms"))
}

// `seqbox bench latency` prints a line per run with the rate applied, the
// receive→commit percentiles and the publish→commit ones, on both stores
// and both handler kinds.
func TestBenchLatency(t *testing.T) {
	t.Parallel()
	line := regexp.MustCompile(`(?m)^latency: run=([12]) target=300 msgs_per_s=(` + num + `) p50_ms=(` + num + `) p99_ms=(` + num + `) max_ms=(` + num + `) messages=([0-9]+) publish_p50_ms=(` + num + `) publish_p99_ms=(` + num + `)$`)
	for _, args := range [][]string{
		{"--runs", "2"},
		{"--batch-handler", "--db", pgtest.URL(t)},
	} {
		out := ok(t, append([]string{"bench", "latency", "--rate", "300", "--seconds", "0.5", "--keys", "10"}, args...)...)
		require.Regexp(t, `^seqbox bench latency  db=(sqlite|postgres) `, out)
		runs := line.FindAllStringSubmatch(out, -1)
		require.NotEmpty(t, runs, out)
		for _, m := range runs {
			n, err := strconv.Atoi(m[6])
			require.NoError(t, err)
			require.Positive(t, n, "messages measured in run %s", m[1])
			p50, _ := strconv.ParseFloat(m[3], 64)
			p99, _ := strconv.ParseFloat(m[4], 64)
			require.Positive(t, p50)
			require.GreaterOrEqual(t, p99, p50)
			e2e50, _ := strconv.ParseFloat(m[7], 64)
			e2e99, _ := strconv.ParseFloat(m[8], 64)
			require.Positive(t, e2e50, "publish→commit")
			require.GreaterOrEqual(t, e2e99, e2e50)
		}
	}
}

func TestBenchBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"throughput", "--messages", "0"}, "seqbox: bench throughput: --messages 0: must be at least 1"},
		{[]string{"throughput", "--messages", "2000000000"}, "seqbox: bench throughput: --messages 2000000000: at most 10000000 (a run holds them in memory)"},
		{[]string{"throughput", "--workers", "-1"}, "seqbox: bench throughput: --workers -1: must be at least 1"},
		{[]string{"throughput", "--deliver-messages", "-5"}, "seqbox: bench throughput: --deliver-messages -5: must not be negative"},
		{[]string{"purge", "--rows", "0"}, "seqbox: bench purge: --rows 0: must be at least 1"},
		{[]string{"purge", "--baseline", "0s"}, "seqbox: bench purge: --baseline 0s: must be positive"},
		{[]string{"purge", "--warmup", "-1s"}, "seqbox: bench purge: --warmup -1s: must not be negative"},
		{[]string{"purge", "--rate", "-1"}, "seqbox: bench purge: --rate -1: must not be negative"},
		{[]string{"purge", "--batch", "x"}, `seqbox: bench purge: invalid argument "x" for "--batch" flag`},
		{[]string{"latency"}, "seqbox: bench latency: --rate 0: must be at least 1"},
		{[]string{"latency", "--rate", "10", "--seconds", "NaN"}, "seqbox: bench latency: --seconds NaN: must be more than 0 and at most 3600"},
		{[]string{"latency", "--rate", "10", "--seconds", "0"}, "seqbox: bench latency: --seconds 0: must be more than 0 and at most 3600"},
		{[]string{"latency", "--rate", "10", "--runs", "0"}, "seqbox: bench latency: --runs 0: must be at least 1"},
	} {
		require.True(t, strings.HasPrefix(fails(t, append([]string{"bench"}, tc.args...)...), tc.want), "%v", tc.args)
	}
	require.Contains(t, fails(t, "bench", "purge", "--db", "/nonexistent-dir/x.db", "--rows", "10"), "does not exist")
}

// `seqbox bench --quick` (docs/design.md §17) ends with the summary line, every
// figure a positive number; the rows above name the three modes and the
// half-rate run, and before them the key sweep.
func TestBenchSummaryQuick(t *testing.T) {
	t.Parallel()
	r := exe(t, "", "bench", "--quick")
	require.Equal(t, 0, r.code, "stderr %q", r.stderr)
	out := r.stdout
	t.Logf("\n%s\n%s", out, r.stderr)
	// stderr is not a terminal: one line as each phase ends, in order,
	// and no line rewritten in place.
	require.Regexp(t, regexp.MustCompile(`^bench: raw limit: `+num+` msgs/s, best of batch [0-9]+, [0-9] writers \(`+num+`m?s\)\n`+
		`bench: seqbox end to end: `+num+` msgs/s over 5000 messages \(`+num+`m?s\)\n`+
		`bench: seqbox end to end, BatchHandler: `+num+` msgs/s over 5000 messages \(`+num+`m?s\)\n`+
		`bench: naive: `+num+` msgs/s over 500 messages \(`+num+`m?s\)\n`+
		`bench: latency at 10% rate: p99 `+num+` ms at `+num+` msgs/s \(`+num+`m?s\)\n`+
		`bench: latency at half rate: p99 `+num+` ms at `+num+` msgs/s \(`+num+`m?s\)\n`+
		`bench: latency at 90% rate: p99 `+num+` ms at `+num+` msgs/s \(`+num+`m?s\)\n`+
		`bench: seqbox over 1 to 1,000,000 keys: 5 spreads of keys \(`+num+`m?s\)\n$`), r.stderr)
	checkKeySweep(t, out)
	require.Regexp(t, `(?m)^rss bounds: .* SQLite's page cache is cache_size=-?[0-9]+ `, out)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	last := lines[len(lines)-1]
	require.Regexp(t, regexp.MustCompile(`^bench: ratio_vs_raw=`+num+` ratio_vs_naive=`+num+` msgs_per_s=`+num+` p99_ms=`+num+`$`), last)
	for k, v := range kv(t, out, "bench: ") {
		f, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err, k)
		require.Greater(t, f, 0.0, "%s must be measured", k)
	}
	for _, mode := range []string{"raw-limit ", "seqbox ", "seqbox-batch ", "naive ", "seqbox@10% ", "seqbox@half ", "seqbox@90% "} {
		require.Contains(t, out, "\n"+mode, "the %s row", mode)
	}
	require.Contains(t, fails(t, "bench", "extra"), "unknown command")
}

// checkKeySweep requires the key sweep's table before the side-by-side
// one: a row for 1, 100, 10,000 and 1,000,000 keys and for the Zipf
// spread, each with 1000 messages at a measured rate; the million keys
// seeded and only the messages' keys versioned; and the resident set of
// the million-key run with what bounds it.
func checkKeySweep(t *testing.T, out string) {
	t.Helper()
	header := regexp.MustCompile(`(?m)^keys +spread +messages +seconds +msgs/s +p50_ms +p99_ms +rss_peak_mb +rss_increase_mb +note *$`)
	loc := header.FindStringIndex(out)
	require.NotNil(t, loc, "the key sweep's header")
	modes := regexp.MustCompile(`(?m)^mode +msgs/s +note *$`).FindStringIndex(out)
	require.NotNil(t, modes)
	require.Less(t, loc[0], modes[0], "the key sweep comes before the side-by-side table")
	for _, row := range []string{`1 +uniform`, `100 +uniform`, `10000 +uniform`, `1000000 +uniform`, `10000 +zipf\(s=1\.1\)`} {
		m := regexp.MustCompile(`(?m)^` + row + ` +1000 +(` + num + `) +(` + num + `) +(` + num + `) +(` + num + `) +(` + num + `) +(` + num + `)(.*)$`).
			FindStringSubmatch(out)
		require.NotNil(t, m, "the row %s", row)
		for i, name := range []string{"seconds", "msgs/s", "p50_ms", "p99_ms", "rss_peak_mb"} {
			f, err := strconv.ParseFloat(m[i+1], 64)
			require.NoError(t, err)
			require.Greater(t, f, 0.0, "%s of %s must be measured", name, row)
		}
		p50, _ := strconv.ParseFloat(m[3], 64)
		p99, _ := strconv.ParseFloat(m[4], 64)
		require.LessOrEqual(t, p50, p99, row)
		switch row {
		case `1000000 +uniform`:
			require.Regexp(t, `^ +1000000 key rows pre-seeded in `+num+`s \(untimed\); after the run 1000000 rows, 1000 of them versioned *$`, m[7])
		case `10000 +zipf\(s=1\.1\)`:
			hot := regexp.MustCompile(`hottest key (` + num + `)% of messages, ([0-9]+) keys used`).FindStringSubmatch(m[7])
			require.NotNil(t, hot, m[7])
			share, _ := strconv.ParseFloat(hot[1], 64)
			require.Greater(t, share, 5.0, "s=1.1 puts a hot key well above 1/10000 of the messages")
			require.Less(t, atoi(t, hot[2]), 1000, "and leaves most keys unused")
		}
	}
	rss := kv(t, out, "rss: ")
	require.Equal(t, "1000000", rss["keys"])
	require.Equal(t, "1000", rss["messages"])
	require.Regexp(t, `(?m)^rss bounds: the consumer holds at most [0-9]+ received deliveries .*no per-key state`, out)
	if runtime.GOOS != "linux" {
		require.Equal(t, "-", rss["peak_mb"], "no /proc/self/status: not measured")
		return
	}
	peak, err := strconv.ParseFloat(rss["peak_mb"], 64)
	require.NoError(t, err, "peak_mb")
	base, err := strconv.ParseFloat(rss["baseline_mb"], 64)
	require.NoError(t, err, "baseline_mb")
	inc, err := strconv.ParseFloat(rss["increase_mb"], 64)
	require.NoError(t, err, "increase_mb")
	require.Greater(t, base, 0.0)
	require.GreaterOrEqual(t, peak, base)
	require.InDelta(t, peak-base, inc, 0.15)
	require.Regexp(t, `(?m)^rss: .* source="VmHWM of /proc/self/status`, out)
}
