package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// `seqbox bench prefill` (issue 37, item 4) ends with its one line, every
// figure a number, and its check: every message applied once, and the
// purge removed exactly the seeded identities that expired at its clock
// (9,999 of 20,000: those whose retention ends in the first half of the
// 30 days) and kept the rest and the 100 held and 100 blocked ones. On
// stderr (not a terminal), a line as each phase ends. The figures are not
// asserted.
func TestBenchPrefill(t *testing.T) {
	for store, db := range map[string]func(*testing.T) string{
		"sqlite":   func(t *testing.T) string { return newDB(t) },
		"postgres": func(t *testing.T) string { return pgtest.URL(t) },
	} {
		t.Run(store, func(t *testing.T) {
			r := exe(t, "", "bench", "prefill", "--db", db(t), "--rows", "20000", "--messages", "300", "--seconds", "0.3",
				"--workers", "2", "--batch", "64", "--keys", "10")
			require.Equal(t, 0, r.code, "stderr %q", r.stderr)
			t.Logf("\n%s\n%s", r.stdout, r.stderr)
			require.Regexp(t, regexp.MustCompile(`^bench: empty inbox: `+num+` msgs/s, p99 `+num+` ms at [0-9]+ msgs/s \(`+num+`m?s\)\n`+
				`bench: seed: 20000 identities, `+num+` rows/s \(`+num+`m?s\)\n`+
				`bench: full inbox: `+num+` msgs/s, p99 `+num+` ms at [0-9]+ msgs/s \(`+num+`m?s\)\n`+
				`bench: purge: 9999 identities removed, `+num+` rows/s \(`+num+`m?s\)\n$`), r.stderr)
			out := r.stdout
			require.Regexp(t, `^seqbox bench prefill  db=`+store+` \S+ rows=20000 messages=300 seconds=0.3 workers=2 batch=64 keys=10 purge_batch=500\n`, out)
			require.Regexp(t, `(?m)^seed: 20000 live identities in `+num+`s \(`+num+` rows/s\) onto an inbox of 0, 16 sources, .* plus 100 held and 100 blocked`, out)
			for _, row := range []string{"empty", `full\(\+20000\)`} {
				require.Regexp(t, `(?m)^`+row+` +300( +`+num+`){2} +(`+num+`|-)( +`+num+`){6} *$`, out)
			}
			require.Regexp(t, `(?m)^written_kb/msg: .*; the purge: (`+num+`|-) KiB per identity removed$`, out)
			// 9999 identities: 19 batches of 500 and the last of 499, which ends the purge.
			require.Regexp(t, `(?m)^purge: removed=9999 seconds=`+num+` rows/s=`+num+` batches=20 `, out)
			require.Regexp(t, `(?m)^purge vs ingest: the retention purge removed `+num+` identities/s \(500 per transaction, alone\), the core adds `+
				num+`/s on the full inbox: the purge (keeps up|does NOT keep up: .*) \(x`+num+`\); sharing one bottleneck, the two sustain `+num+` msgs/s$`, out)

			vacuum := regexp.MustCompile(`(?m)^vacuum: VACUUM seqbox_inbox after the purge \(autovacuum's work, not in the purge's rate\) took ` +
				num + `s: purge and vacuum together ` + num + ` identities/s, x` + num + ` the ingest$`)
			if store == "postgres" {
				require.Regexp(t, vacuum, out)
			} else {
				require.NotRegexp(t, vacuum, out, "SQLite frees a deleted row's space at once")
			}

			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			last := lines[len(lines)-1]
			require.True(t, strings.HasPrefix(last, "prefill: "), "the last line is the summary: %q", last)
			m := kv(t, out, "prefill: ")
			require.Equal(t, store, m["store"])
			require.Equal(t, "20000", m["rows"])
			require.Equal(t, m["full_msgs_per_s"], m["ingest_msgs_per_s"], "the ingest is the core's rate on the full inbox")
			for _, k := range []string{"empty_msgs_per_s", "empty_p99_ms", "full_msgs_per_s", "full_p99_ms", "rate_vs_empty", "p99_vs_empty",
				"purge_rows_per_s", "ingest_msgs_per_s", "purge_vs_ingest"} {
				require.Regexp(t, `^`+num+`$`, m[k], k)
			}
			check := regexp.MustCompile(`^ok\(([0-9]+)_applied_once,9999_expired_purged,([0-9]+)_unexpired_kept,200_held_blocked_kept\)$`).
				FindStringSubmatch(m["check"])
			require.NotNil(t, check, m["check"])
			applied := atoi(t, check[1])
			// Warm-up and saturated runs: 30 + 300 messages, twice; and
			// what the two fixed-rate runs published.
			require.Greater(t, applied, 2*(30+300))
			require.Equal(t, 20000-9999+applied, atoi(t, check[2]), "the newer half and every applied message are kept")

			c := kv(t, out, "check: ")
			require.Equal(t, "0", c["other"])
			require.Equal(t, check[1], c["applied"])
			require.Equal(t, check[1], c["live_rows"])
			require.Equal(t, check[1], c["live_effects"])
			require.Equal(t, "9999", c["purgeable_before"])
			require.Equal(t, "0", c["purgeable_left"])
			require.Equal(t, "200/200", c["held_blocked_kept"])
			require.True(t, strings.HasSuffix(lines[len(lines)-2], " ok"), "the check line ends in ok")
		})
	}
}

// `seqbox bench --prefill N` is bench prefill --rows N with its defaults,
// and with --quick a short run of each inbox (2,000 messages, 1 s at a
// fixed rate): the empty and the pre-filled inbox side by side, then the
// purge of the expired half (999 of 2,000) against the ingest, checked.
func TestBenchPrefillFlag(t *testing.T) {
	for store, db := range map[string]func(*testing.T) string{
		"sqlite":   func(t *testing.T) string { return newDB(t) },
		"postgres": func(t *testing.T) string { return pgtest.URL(t) },
	} {
		t.Run(store, func(t *testing.T) {
			r := exe(t, "", "bench", "--prefill", "2000", "--quick", "--db", db(t))
			require.Equal(t, 0, r.code, "stderr %q", r.stderr)
			t.Logf("\n%s\n%s", r.stdout, r.stderr)
			require.Regexp(t, `^seqbox bench prefill  db=`+store+` \S+ rows=2000 messages=2000 seconds=1 workers=4 batch=[0-9]+ keys=100 purge_batch=500\n`, r.stdout)
			for _, row := range []string{"empty", `full\(\+2000\)`} {
				require.Regexp(t, `(?m)^`+row+` +2000( +`+num+`){2} +(`+num+`|-)( +`+num+`){6} *$`, r.stdout)
			}
			m := kv(t, r.stdout, "prefill: ")
			require.Equal(t, store, m["store"])
			require.Equal(t, "2000", m["rows"])
			require.Regexp(t, `^`+num+`$`, m["rate_vs_empty"])
			require.Regexp(t, `^`+num+`$`, m["purge_vs_ingest"])
			require.Regexp(t, `^ok\([0-9]+_applied_once,999_expired_purged,[0-9]+_unexpired_kept,200_held_blocked_kept\)$`, m["check"])
		})
	}
}

func TestBenchPrefillBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"prefill", "--rows", "0"}, "seqbox: bench prefill: --rows 0: must be at least 1"},
		{[]string{"prefill", "--rows", "-5"}, "seqbox: bench prefill: --rows -5: must be at least 1"},
		{[]string{"prefill", "--messages", "0"}, "seqbox: bench prefill: --messages 0: must be at least 1"},
		{[]string{"prefill", "--messages", "99999999999"}, "seqbox: bench prefill: --messages 99999999999: at most 10000000 (a run holds them in memory)"},
		{[]string{"prefill", "--purge-batch", "-1"}, "seqbox: bench prefill: --purge-batch -1: must be at least 1"},
		{[]string{"prefill", "--cpuprofile", "/nonexistent/x"}, "seqbox: bench prefill: --cpuprofile /nonexistent/x: no directory /nonexistent for its files"},
		{[]string{"prefill", "--seconds", "0"}, "seqbox: bench prefill: --seconds 0: must be more than 0 and at most 3600"},
		{[]string{"prefill", "--rows", "x"}, `seqbox: bench prefill: invalid argument "x" for "--rows" flag`},
		{[]string{"--prefill", "0"}, "seqbox: bench: --prefill 0: must be at least 1"},
		{[]string{"--prefill", "-3"}, "seqbox: bench: --prefill -3: must be at least 1"},
	} {
		require.True(t, strings.HasPrefix(fails(t, append([]string{"bench"}, tc.args...)...), tc.want), "%v", tc.args)
	}
	// --prefill runs bench prefill on --db.
	require.Regexp(t, `^seqbox: bench prefill: .*does not exist`, fails(t, "bench", "--prefill", "10", "--db", "/nonexistent-dir/x.db"))
}
