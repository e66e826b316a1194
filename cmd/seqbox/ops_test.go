package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// replayK2 replays testdata/k2.jsonl into a fresh database: K2 v1 applies,
// v2 fails permanently and blocks the key, v3 parks behind it.
func replayK2(t *testing.T) string {
	t.Helper()
	db := newDB(t)
	require.Equal(t, lines(
		`{"source":"crm","id":"k2-v1","partitionkey":"K2","objectversion":1,"outcome":"applied","reason":""}`,
		`{"source":"crm","id":"k2-v2","partitionkey":"K2","objectversion":2,"outcome":"dead_lettered",`+
			`"reason":"permanent failure: permanent: record: data.fail=permanent"}`,
		`{"source":"crm","id":"k2-v3","partitionkey":"K2","objectversion":3,"outcome":"blocked",`+
			`"reason":"key blocked since 2026-01-02T03:04:05Z: dead-lettered k2-v2: permanent failure"}`,
		"deliveries=3 accepted=1 duplicates=0 inbox_rows=3 business_effects=1 applied=1 duplicate=0 collision=0 "+
			"semantic_duplicate=0 stale=0 version_conflict=0 held=0 expired=0 blocked=1 retry=0 dead_lettered=1 rejected=0",
	), ok(t, "replay", "--db", db, "--now", now, fixture(t, "k2.jsonl")))
	return db
}

const (
	dlqHeader  = "SEQ  SOURCE  ID     PARTITIONKEY  OBJECTVERSION  REASON             ATTEMPTS  DEAD_AT               RESOLUTION"
	keysHeader = "PARTITIONKEY  STATUS   VERSION  EXPECTED  LOWEST_PARKED  HELD  BLOCKED_MESSAGES  SINCE                 " +
		"REASON                                  ACTION"
)

// k2Advice is the command that unsticks K2 when it is blocked behind DLQ
// row seq of db's replay consumer: the advice repeats --db and --consumer
// so that it can be pasted as is. (The test databases are temporary paths
// a shell does not split, so they print unquoted.)
func k2Advice(db, seq string) string {
	target := " --db " + db + " --consumer replay"
	return "seqbox dlq redrive " + seq + target + "  # or: seqbox dlq skip " + seq + " --by WHO --reason WHY" + target
}

// k2Blocked is the keys list row of K2 blocked behind DLQ row 1.
func k2Blocked(db string) string {
	return "K2            blocked  1        2         3              0     1                 2026-01-02T03:04:05Z  " +
		"dead-lettered k2-v2: permanent failure  " + k2Advice(db, "1")
}

// stampRE matches a time as the text outputs print it.
var stampRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)

// wallTime is what wallTimes puts in place of a time read from the clock.
const wallTime = "####-##-##T##:##:##Z"

// wallTimes replaces in out every time that lies between since (taken
// before the commands that ran) and now with wallTime, which has the same
// width, so text tables keep their alignment. The operator commands take
// no --now: the consumer that executes a request stamps it (a recorded
// gap, a new DLQ row) with the wall clock, the one truly nondeterministic
// value in their output. The fixed times of the fixtures stay as they are.
func wallTimes(t *testing.T, since time.Time, out string) string {
	t.Helper()
	until := time.Now()
	return stampRE.ReplaceAllStringFunc(out, func(s string) string {
		at, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		if at.Before(since.Truncate(time.Second)) || at.After(until) {
			return s
		}
		return wallTime
	})
}

func TestDLQBlockedKeyThenSkip(t *testing.T) {
	t.Parallel()
	db := replayK2(t)

	require.Equal(t, lines(
		dlqHeader,
		"1    crm     k2-v2  K2            2              permanent failure  1         2026-01-02T03:04:05Z  -",
	), ok(t, "dlq", "list", "--db", db))
	require.Equal(t, lines(
		`{"seq":1,"source":"crm","id":"k2-v2","partitionkey":"K2","objectversion":2,"reason":"permanent failure",`+
			`"attempts":1,"dead_at":"2026-01-02T03:04:05Z","resolution":""}`,
	), dlqLines(t, ok(t, "dlq", "list", "--db", db, "--json")))

	// show prints the row in full and the original envelope byte for byte.
	require.Equal(t, lines(
		"seq:           1",
		"consumer:      replay",
		"source:        crm",
		"id:            k2-v2",
		"partitionkey:  K2",
		"objectversion: 2",
		"payload_hash:  96713d0d4dbe3d3030d477e6fad225e3e32db2e52c7725848a4d8a0c030b7fda",
		"reason:        permanent failure",
		"attempts:      1",
		"first_error:   permanent: record: data.fail=permanent",
		"last_error:    permanent: record: data.fail=permanent",
		"dead_at:       2026-01-02T03:04:05Z",
		"resolution:    -",
		"resolved_at:   -",
		"envelope (137 bytes):",
		fixtureLine(t, "k2.jsonl", 2),
	), ok(t, "dlq", "show", "1", "--db", db))
	var shown struct {
		Envelope struct {
			Text   *string `json:"text"`
			Base64 []byte  `json:"base64"`
			Bytes  int     `json:"bytes"`
		} `json:"envelope"`
		FirstError string `json:"first_error"`
	}
	require.NoError(t, json.Unmarshal([]byte(ok(t, "dlq", "show", "1", "--db", db, "--json")), &shown))
	require.Equal(t, fixtureLine(t, "k2.jsonl", 2), *shown.Envelope.Text, "the admin API's view: the bytes as text when they are UTF-8")
	require.Equal(t, len(fixtureLine(t, "k2.jsonl", 2)), shown.Envelope.Bytes)
	require.Equal(t, "permanent: record: data.fail=permanent", shown.FirstError)

	// The stuck key names the DLQ message and the two ways out.
	require.Equal(t, lines(keysHeader, k2Blocked(db)), ok(t, "keys", "list", "--db", db))
	require.Equal(t, lines(
		`{"partitionkey":"K2","status":"blocked","version":1,"expected":2,"lowest_parked":3,"held":0,"blocked":true,`+
			`"blocked_messages":1,"since":"2026-01-02T03:04:05Z","reason":"dead-lettered k2-v2: permanent failure",`+
			`"blocked_by":{"source":"crm","id":"k2-v2","dlq_seq":1},"hold_until":null,`+
			`"action":`+jsonString(t, k2Advice(db, "1"))+`}`,
	), ok(t, "keys", "list", "--db", db, "--json"))

	// keys release refuses a key blocked behind a dead letter: the DLQ
	// row would stay open while the key moved past it.
	require.Equal(t, `seqbox: keys release: key "K2" is blocked behind dead-lettered message source="crm" id="k2-v2", `+
		`not by a gap: `+k2Advice(db, "1"),
		fails(t, "keys", "release", "--output", "jsonl", "K2", "--db", db, "--by", "alice", "--reason", "no"))

	// Skip records the gap with who and why and releases v3. The replay
	// consumer is not running: the CLI executes the request in-process.
	skipped := time.Now()
	require.Equal(t, lines(
		`{"source":"crm","id":"k2-v3","partitionkey":"K2","objectversion":3,"outcome":"applied","reason":""}`,
	), ok(t, "dlq", "skip", "--output", "jsonl", "1", "--db", db, "--by", "alice", "--reason", "v2 superseded by v3"))

	require.Equal(t, lines(
		"SEQ  SOURCE  ID  PARTITIONKEY  OBJECTVERSION  REASON  ATTEMPTS  DEAD_AT  RESOLUTION",
	), ok(t, "dlq", "list", "--db", db))
	require.Empty(t, dlqLines(t, ok(t, "dlq", "list", "--db", db, "--json")))
	require.Equal(t, lines(
		`{"seq":1,"source":"crm","id":"k2-v2","partitionkey":"K2","objectversion":2,"reason":"permanent failure",`+
			`"attempts":1,"dead_at":"2026-01-02T03:04:05Z","resolution":"skipped by alice: v2 superseded by v3"}`,
	), dlqLines(t, ok(t, "dlq", "list", "--all", "--db", db, "--json")))
	require.Empty(t, ok(t, "keys", "list", "--db", db, "--json"))
	require.Equal(t, lines(
		"PARTITIONKEY  STATUS  VERSION  EXPECTED  LOWEST_PARKED  HELD  BLOCKED_MESSAGES  SINCE  REASON  ACTION",
		"K2            ok      3        4         -              0     0                 -      -       -",
	), ok(t, "keys", "list", "--all", "--db", db))

	require.Equal(t, lines(
		"partitionkey:     K2",
		"status:           ok",
		"version:          3",
		"expected:         4",
		"lowest_parked:    -",
		"first_version:    version 1, the first seen, started the key (no first version configured); a lower version that came later is stale",
		"held:             0",
		"blocked:          false",
		"blocked_messages: 0",
		"since:            -",
		"reason:           -",
		"blocked_by:       -",
		"hold_until:       -",
		"action:           -",
		"",
		"parked: none",
		"",
		"gaps:",
		"FROM_VERSION  TO_VERSION  DECIDED_BY  REASON               AT",
		"2             2           alice       v2 superseded by v3  "+wallTime,
		"",
		"audit (last 20):",
		"SEQ  AT                    SOURCE  ID     RECEIVED  CURRENT  OUTCOME        REASON                                                                          NEXT_ACTION",
		"1    2026-01-02T03:04:05Z  crm     k2-v2  2         1        dead_lettered  permanent failure: permanent: record: data.fail=permanent                       key blocked: redrive or skip the message (seqbox dlq redrive|skip)",
		"2    2026-01-02T03:04:05Z  crm     k2-v3  3         1        blocked        key blocked since 2026-01-02T03:04:05Z: dead-lettered k2-v2: permanent failure  redrive or skip the message blocking the key",
	), wallTimes(t, skipped, ok(t, "keys", "show", "K2", "--db", db)))

	// A resolved dead letter cannot be skipped or redriven again.
	require.Equal(t, "seqbox: dlq skip: dlq 1: dead letter already resolved (skipped by alice: v2 superseded by v3)",
		fails(t, "dlq", "skip", "--output", "jsonl", "1", "--db", db, "--by", "alice", "--reason", "again"))
	require.Equal(t, "seqbox: dlq redrive: dlq 1: dead letter already resolved (skipped by alice: v2 superseded by v3)",
		fails(t, "dlq", "redrive", "--output", "jsonl", "1", "--db", db))

	// The object reached v3 through the release, and replaying the file
	// again applies nothing.
	out := ok(t, "replay", "--db", db, "--now", now, "--state", fixture(t, "k2.jsonl"))
	require.Equal(t, lines(
		`{"source":"crm","id":"k2-v1","partitionkey":"K2","objectversion":1,"outcome":"duplicate","reason":"identity already recorded (applied)"}`,
		`{"source":"crm","id":"k2-v2","partitionkey":"K2","objectversion":2,"outcome":"duplicate","reason":"identity already recorded (dead_lettered)"}`,
		`{"source":"crm","id":"k2-v3","partitionkey":"K2","objectversion":3,"outcome":"duplicate","reason":"identity already recorded (applied)"}`,
		"deliveries=3 accepted=0 duplicates=3 inbox_rows=3 business_effects=2 applied=0 duplicate=3 collision=0 "+
			"semantic_duplicate=0 stale=0 version_conflict=0 held=0 expired=0 blocked=0 retry=0 dead_lettered=0 rejected=0",
		`{"partitionkey":"K2","version":3,"state":"deal.won","blocked":false,"held":0}`,
	), out)
}

func TestDLQRedriveOfPermanentFailure(t *testing.T) {
	t.Parallel()
	db := replayK2(t)

	// The record handler fails data.fail=permanent every time: the
	// redriven message is dead-lettered again, on its own DLQ row, which
	// keeps its number (its attempts add up), and the key stays blocked
	// behind it. The command prints the result, names the dead letter on
	// stderr and exits 1.
	redriven := time.Now()
	r := exe(t, "", "dlq", "redrive", "--output", "jsonl", "1", "--db", db)
	require.Equal(t, lines(
		`{"source":"crm","id":"k2-v2","partitionkey":"K2","objectversion":2,"outcome":"dead_lettered",`+
			`"reason":"permanent failure: permanent: record: data.fail=permanent"}`,
	), r.stdout)
	require.Equal(t, lines(`seqbox: dlq redrive: source="crm" id="k2-v2" failed again and is dead-lettered (still dlq 1): `+
		`permanent failure: permanent: record: data.fail=permanent`), r.stderr)
	require.Equal(t, 1, r.code)

	// The row's time is the new failure's, stamped by the consumer's clock
	// (no --now).
	require.Equal(t, lines(
		dlqHeader,
		"1    crm     k2-v2  K2            2              permanent failure  2         "+wallTime+"  -",
	), wallTimes(t, redriven, ok(t, "dlq", "list", "--all", "--db", db)))
	require.Equal(t, lines(
		dlqHeader,
		"1    crm     k2-v2  K2            2              permanent failure  2         "+wallTime+"  -",
	), wallTimes(t, redriven, ok(t, "dlq", "list", "--db", db)))

	// The advice still points at row 1. (Since when the key is blocked is
	// TestKeysFailedRedriveKeepsBlockedSince's concern.)
	reps := keyReports(t, "keys", "list", "--db", db, "--json")
	require.Len(t, reps, 1)
	reps[0]["since"] = nil
	require.Equal(t, map[string]any{"partitionkey": "K2", "status": "blocked", "version": 1.0, "expected": 2.0,
		"lowest_parked": 3.0, "held": 0.0, "blocked": true, "blocked_messages": 1.0, "since": nil,
		"reason": "dead-lettered k2-v2: permanent failure", "hold_until": nil,
		"blocked_by": map[string]any{"source": "crm", "id": "k2-v2", "dlq_seq": 1.0},
		"action":     k2Advice(db, "1")}, reps[0])
	// A third failure, through a second redrive: still row 1, three
	// attempts, and its history says both.
	failedAgain(t, "1", "dlq", "redrive", "--output", "jsonl", "1", "--db", db)
	require.Equal(t, lines(
		dlqHeader,
		"1    crm     k2-v2  K2            2              permanent failure  3         "+wallTime+"  -",
	), wallTimes(t, redriven, ok(t, "dlq", "list", "--all", "--db", db)))
	show := ok(t, "dlq", "show", "1", "--db", db)
	require.Equal(t, 2, strings.Count(show, ": failed again after a redrive (1 more attempts): permanent failure"), show)

	// Nothing was applied: v3 is still parked and one effect exists.
	out := ok(t, "replay", "--db", db, "--now", now, "--state", fixture(t, "k2.jsonl"))
	require.True(t, strings.HasSuffix(out, lines(
		"deliveries=3 accepted=0 duplicates=3 inbox_rows=3 business_effects=1 applied=0 duplicate=3 collision=0 "+
			"semantic_duplicate=0 stale=0 version_conflict=0 held=0 expired=0 blocked=0 retry=0 dead_lettered=0 rejected=0",
		`{"partitionkey":"K2","version":1,"state":"deal.opened","blocked":true,"held":0}`,
	)), out)
}

func TestDLQRedriveRetriesTransientFailure(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	// One attempt: e1's transient failure is dead-lettered at once.
	out := ok(t, "replay", "--db", db, "--now", now, "--max-attempts", "1", fixture(t, "outcomes.jsonl"))
	require.Contains(t, out, `{"source":"shop","id":"e1","partitionkey":"E","objectversion":1,"outcome":"dead_lettered",`+
		`"reason":"attempts exhausted (1 of 1): record: data.fail=transient"}`+"\n")

	require.Equal(t, lines(
		`{"seq":1,"source":"","id":"","partitionkey":"","objectversion":null,`+
			`"reason":"rejected: invalid event: envelope: not a JSON object: invalid character 'h' in literal true (expecting 'r') (at byte 1)",`+
			`"attempts":1,"dead_at":"2026-01-02T03:04:05Z","resolution":""}`,
		`{"seq":2,"source":"shop","id":"e1","partitionkey":"E","objectversion":1,"reason":"attempts exhausted (1 of 1)",`+
			`"attempts":1,"dead_at":"2026-01-02T03:04:05Z","resolution":""}`,
	), dlqLines(t, ok(t, "dlq", "list", "--db", db, "--json")))

	// The operator commands take no policy flag: the consumer's attempts
	// come from its registration, which a replay with three attempts
	// updates (applying nothing and adding no DLQ row).
	require.True(t, strings.HasSuffix(ok(t, "replay", "--db", db, "--now", now, "--max-attempts", "3", fixture(t, "outcomes.jsonl")),
		lines("deliveries=13 accepted=0 duplicates=11 inbox_rows=10 business_effects=5 applied=0 duplicate=11 collision=1 "+
			"semantic_duplicate=0 stale=0 version_conflict=0 held=0 expired=0 blocked=0 retry=0 dead_lettered=0 rejected=1")))
	require.Len(t, openDLQ(t, "dlq", "list", "--all", "--db", db, "--json"), 2)

	// As replay does, the redrive sends a retry back at once until the
	// attempts are used up.
	require.Equal(t, lines(
		`{"source":"shop","id":"e1","partitionkey":"E","objectversion":1,"outcome":"retry","reason":"attempt 1 of 3 failed: record: data.fail=transient"}`,
		`{"source":"shop","id":"e1","partitionkey":"E","objectversion":1,"outcome":"retry","reason":"attempt 2 of 3 failed: record: data.fail=transient"}`,
		`{"source":"shop","id":"e1","partitionkey":"E","objectversion":1,"outcome":"dead_lettered",`+
			`"reason":"attempts exhausted (3 of 3): record: data.fail=transient"}`,
	), failedAgain(t, "2", "dlq", "redrive", "--output", "jsonl", "2", "--db", db))
	// Dead-lettered again, on the same row: its attempts add up.
	out = ok(t, "dlq", "show", "2", "--db", db)
	require.Contains(t, out, "reason:        attempts exhausted (3 of 3)\nattempts:      4\n")
	require.Contains(t, out, "first_error:   record: data.fail=transient\nlast_error:    record: data.fail=transient\n")

	// The malformed line's bytes are kept and shown as they came.
	out = ok(t, "dlq", "show", "1", "--db", db)
	require.True(t, strings.HasSuffix(out, "\nenvelope (21 bytes):\nthis line is not JSON\n"), out)
	// Redriving it can only reject it again, under its number.
	require.Equal(t, lines(`{"source":"","id":"","partitionkey":"","objectversion":null,"outcome":"rejected",`+
		`"reason":"invalid event: envelope: not a JSON object: invalid character 'h' in literal true (expecting 'r') (at byte 1)"}`),
		failedAgain(t, "1", "dlq", "redrive", "--output", "jsonl", "1", "--db", db))
}

func TestKeysHeldGapThenRelease(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	file := fixture(t, "gap.jsonl")
	const later = "2026-01-02T03:06:05Z"
	hold := []string{"--hold-timeout", "1m", "--hold-expiry", "block"}

	require.Equal(t, lines(
		`{"source":"crm","id":"k3-v1","partitionkey":"K3","objectversion":1,"outcome":"applied","reason":""}`,
		`{"source":"crm","id":"k3-v3","partitionkey":"K3","objectversion":3,"outcome":"held","reason":"waiting for version 2 (got 3)"}`,
		"deliveries=2 accepted=1 duplicates=0 inbox_rows=2 business_effects=1 applied=1 duplicate=0 collision=0 "+
			"semantic_duplicate=0 stale=0 version_conflict=0 held=1 expired=0 blocked=0 retry=0 dead_lettered=0 rejected=0",
	), ok(t, append([]string{"replay", "--db", db, "--now", now, file}, hold...)...))

	// keys list takes no --now: it tells a running hold from an overdue
	// one by the wall clock, which is long past this replay's deadline.
	heldHeader := "PARTITIONKEY  STATUS  VERSION  EXPECTED  LOWEST_PARKED  HELD  BLOCKED_MESSAGES  SINCE                 " +
		"REASON                         ACTION"
	heldRow := "K3            held    1        2         3              1     0                 2026-01-02T03:04:05Z  " +
		"waiting for version 2 (got 3)  wait for version 2 until 2026-01-02T03:05:05Z"
	require.Equal(t, lines(heldHeader, heldRow+" (overdue: the next sweep applies the hold expiry)"),
		ok(t, "keys", "list", "--db", db))
	// A hold whose deadline the wall clock has not reached yet.
	future := newDB(t)
	ok(t, append([]string{"replay", "--db", future, "--now", "2999-01-02T03:04:05Z", file}, hold...)...)
	require.Equal(t, lines(heldHeader,
		"K3            held    1        2         3              1     0                 2999-01-02T03:04:05Z  "+
			"waiting for version 2 (got 3)  wait for version 2 until 2999-01-02T03:05:05Z"),
		ok(t, "keys", "list", "--db", future))
	require.Equal(t, `seqbox: keys release: key "K3" is not blocked (status held)`,
		fails(t, "keys", "release", "--output", "jsonl", "K3", "--db", db, "--by", "bob", "--reason", "too early"))

	// Replay runs the sweeper at the end: two minutes on, the hold has
	// timed out and, with --hold-expiry block, the key blocks on the gap.
	out := ok(t, append([]string{"replay", "--db", db, "--now", later, "--state", file}, hold...)...)
	require.True(t, strings.HasSuffix(out, "\n"+`{"partitionkey":"K3","version":1,"state":"deal.opened","blocked":true,"held":0}`+"\n"), out)

	// It is stuck since the hold began (03:04:05), not since the block
	// two minutes later: one since per stuck key.
	release := "seqbox keys release K3 --by WHO --reason WHY --db " + db + " --consumer replay"
	require.Equal(t, lines(
		"PARTITIONKEY  STATUS   VERSION  EXPECTED  LOWEST_PARKED  HELD  BLOCKED_MESSAGES  SINCE                 "+
			"REASON                                              ACTION",
		"K3            blocked  1        2         3              0     1                 2026-01-02T03:04:05Z  "+
			"hold timed out after 1m0s waiting before version 3  "+release,
	), ok(t, "keys", "list", "--db", db))
	var key struct {
		Kind      string          `json:"kind"`
		Status    string          `json:"status"`
		BlockedBy json.RawMessage `json:"blocked_by"`
		Action    string          `json:"action"`
	}
	showJSON := strings.Split(strings.TrimSuffix(ok(t, "keys", "show", "K3", "--db", db, "--json"), "\n"), "\n")
	require.NoError(t, json.Unmarshal([]byte(showJSON[0]), &key))
	require.Equal(t, "key", key.Kind)
	require.Equal(t, "blocked", key.Status)
	require.Equal(t, "null", string(key.BlockedBy))
	require.Equal(t, release, key.Action)
	require.Equal(t, `{"kind":"parked","seq":1,"source":"crm","id":"k3-v3","objectversion":3,"reason":"blocked",`+
		`"detail":"waiting for version 2 (got 3)","parked_at":"2026-01-02T03:04:05Z","hold_until":null,`+
		`"envelope":`+jsonString(t, fixtureLine(t, "gap.jsonl", 2))+`}`, parkedLine(t, showJSON[1]))

	require.Equal(t, "seqbox: keys release: --by and --reason are required: the recorded gap must be attributable",
		fails(t, "keys", "release", "--output", "jsonl", "K3", "--db", db, "--by", "bob"))
	released := time.Now()
	require.Equal(t, lines(
		`{"source":"crm","id":"k3-v3","partitionkey":"K3","objectversion":3,"outcome":"applied","reason":""}`,
	), ok(t, "keys", "release", "--output", "jsonl", "K3", "--db", db, "--by", "bob", "--reason", "v2 lost upstream"))

	out = ok(t, "keys", "show", "K3", "--db", db)
	require.Contains(t, out, "status:           ok\nversion:          3\n")
	// The gap is stamped by the consumer's clock (no --now).
	require.Contains(t, wallTimes(t, released, out), lines(
		"gaps:",
		"FROM_VERSION  TO_VERSION  DECIDED_BY  REASON            AT",
		"2             2           bob         v2 lost upstream  "+wallTime,
	))
	require.Empty(t, ok(t, "keys", "list", "--db", db, "--json"))
}

func TestOperatorErrors(t *testing.T) {
	t.Parallel()
	db := replayK2(t)
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"db required", []string{"dlq", "list"}, "seqbox: --db is required: the database the consumer uses"},
		{"db required for keys", []string{"keys", "show", "K2"}, "seqbox: --db is required: the database the consumer uses"},
		{"unknown seq", []string{"dlq", "show", "42", "--db", db}, `seqbox: dlq 42: not found (consumer "replay")`},
		{"unknown seq redrive", []string{"dlq", "redrive", "--output", "jsonl", "42", "--db", db}, `seqbox: dlq redrive: dlq 42: not found (consumer "replay")`},
		{"unknown seq skip", []string{"dlq", "skip", "--output", "jsonl", "42", "--db", db, "--by", "a", "--reason", "b"},
			`seqbox: dlq skip: dlq 42: not found (consumer "replay")`},
		{"unknown consumer", []string{"dlq", "show", "1", "--db", db, "--consumer", "billing"},
			`seqbox: --consumer "billing": no such consumer in ` + db + `; it has "replay"`},
		{"unknown key", []string{"keys", "show", "NOPE", "--db", db}, `seqbox: key "NOPE": not found (consumer "replay")`},
		{"unknown key release", []string{"keys", "release", "--output", "jsonl", "NOPE", "--db", db, "--by", "a", "--reason", "b"},
			`seqbox: keys release: key "NOPE": not found (consumer "replay")`},
		{"bad seq", []string{"dlq", "show", "one", "--db", db},
			`seqbox: dlq show: SEQ "one" is not a DLQ sequence number (see seqbox dlq list)`},
		{"skip without reason", []string{"dlq", "skip", "--output", "jsonl", "1", "--db", db, "--by", "alice"},
			"seqbox: dlq skip: --by and --reason are required: the recorded gap must be attributable"},
		{"skip without who", []string{"dlq", "skip", "--output", "jsonl", "1", "--db", db, "--reason", "why"},
			"seqbox: dlq skip: --by and --reason are required: the recorded gap must be attributable"},
		{"bad flag", []string{"dlq", "list", "--db", db, "--bogus"}, "seqbox: dlq list: unknown flag: --bogus (see seqbox dlq list --help)"},
		{"bad root flag", []string{"--bogus"}, "seqbox: unknown flag: --bogus (see seqbox --help)"},
		// The policies come from the consumer's registration, not from flags.
		{"no policy flags", []string{"keys", "list", "--db", db, "--on-dead-letter", "shrug"},
			"seqbox: keys list: unknown flag: --on-dead-letter (see seqbox keys list --help)"},
		{"no gap policy flag", []string{"dlq", "list", "--db", db, "--gap-policy", "advance"},
			"seqbox: dlq list: unknown flag: --gap-policy (see seqbox dlq list --help)"},
		{"no attempts flag", []string{"dlq", "redrive", "--output", "jsonl", "1", "--db", db, "--max-attempts", "3"},
			"seqbox: dlq redrive: unknown flag: --max-attempts (see seqbox dlq redrive --help)"},
		{"no clock flag", []string{"dlq", "skip", "--output", "jsonl", "1", "--db", db, "--by", "a", "--reason", "b", "--now", now},
			"seqbox: dlq skip: unknown flag: --now (see seqbox dlq skip --help)"},
		{"no hold flag", []string{"keys", "release", "--output", "jsonl", "K2", "--db", db, "--by", "a", "--reason", "b", "--hold-timeout", "1m"},
			"seqbox: keys release: unknown flag: --hold-timeout (see seqbox keys release --help)"},
		{"wait must be positive", []string{"dlq", "redrive", "--output", "jsonl", "1", "--db", db, "--wait", "0s"},
			"seqbox: dlq redrive: --wait 0s: must be positive"},
		{"json on an action", []string{"dlq", "redrive", "--output", "jsonl", "1", "--db", db, "--json"},
			"seqbox: dlq redrive: unknown flag: --json (see seqbox dlq redrive --help)"},
		{"unknown subcommand", []string{"dlq", "purge"}, `seqbox: unknown command "purge" for "seqbox dlq" (see seqbox dlq --help)`},
		{"unknown keys subcommand", []string{"keys", "drop"}, `seqbox: unknown command "drop" for "seqbox keys" (see seqbox keys --help)`},
		{"placeholders pasted as they are", []string{"keys", "release", "--output", "jsonl", "K", "--by", "WHO", "--reason", "WHY", "--db", "x.db"},
			`seqbox: keys release: --by WHO --reason WHY are placeholders: say who decides and why (they are recorded)`},
		{"misspelt keys subcommand", []string{"keys", "lsit"}, `seqbox: unknown command "lsit" for "seqbox keys"; did you mean "list"? (see seqbox keys --help)`},
		{"show needs a seq", []string{"dlq", "show", "--db", db}, "seqbox: dlq show: expects one SEQ argument, got 0"},
		{"release needs one key", []string{"keys", "release", "--output", "jsonl", "A", "B", "--db", db, "--by", "a", "--reason", "b"},
			"seqbox: keys release: expects one KEY argument, got 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, fails(t, c.args...))
		})
	}

	t.Run("missing database is not created", func(t *testing.T) {
		t.Parallel()
		missing := filepath.Join(dir, "typo.db")
		require.Equal(t, "seqbox: --db "+missing+": no such file or directory", fails(t, "keys", "list", "--db", missing))
		_, err := os.Stat(missing)
		require.True(t, os.IsNotExist(err), "the operator commands must not create a database: %v", err)
	})
	t.Run("not a seqbox database", func(t *testing.T) {
		t.Parallel()
		notes := filepath.Join(dir, "notes.txt")
		require.NoError(t, os.WriteFile(notes, []byte("not a database\n"), 0o644))
		line := fails(t, "dlq", "list", "--db", notes)
		require.True(t, strings.HasPrefix(line, "seqbox: not a seqbox database: "+notes), line)
	})
	t.Run("unknown consumer lists the registered ones", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, `seqbox: --consumer "billing": no such consumer in `+db+`; it has "replay"`,
			fails(t, "dlq", "list", "--db", db, "--consumer", "billing", "--json"))
		require.Equal(t, `seqbox: --consumer "billing": no such consumer in `+db+`; it has "replay"`,
			fails(t, "keys", "list", "--all", "--db", db, "--consumer", "billing", "--json"))
	})
}

// jsonString is s as a JSON string, escaped as the binary escapes it.
func jsonString(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(s))
	return strings.TrimSuffix(b.String(), "\n")
}

// keyReports decodes the JSON lines of a keys command.
func keyReports(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(ok(t, args...), "\n"), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		out = append(out, m)
	}
	return out
}

// dlqLines projects the JSON of dlq list (the admin API's view of each
// dead letter) on the fields these tests assert, in their order.
func dlqLines(t *testing.T, out string) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var v struct {
			Seq           int64   `json:"seq"`
			Source        string  `json:"source"`
			ID            string  `json:"id"`
			PartitionKey  string  `json:"partitionkey"`
			ObjectVersion *int64  `json:"objectversion"`
			Reason        string  `json:"reason"`
			Attempts      int     `json:"attempts"`
			DeadAt        *string `json:"dead_at"`
			Resolution    string  `json:"resolution"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &v), line)
		enc, err := json.Marshal(v)
		require.NoError(t, err)
		b.Write(enc)
		b.WriteString("\n")
	}
	return b.String()
}

// parkedLine projects a "parked" line of keys show --output jsonl (the
// admin API's view of a parked message, under its kind) on the fields
// these tests assert, in their order, the envelope as its text.
func parkedLine(t *testing.T, line string) string {
	t.Helper()
	type fields struct {
		Kind          string  `json:"kind"`
		Seq           int64   `json:"seq"`
		Source        string  `json:"source"`
		ID            string  `json:"id"`
		ObjectVersion *int64  `json:"objectversion"`
		Reason        string  `json:"reason"`
		Detail        string  `json:"detail"`
		ParkedAt      *string `json:"parked_at"`
		HoldUntil     *string `json:"hold_until"`
	}
	var v struct {
		fields
		Envelope struct {
			Text *string `json:"text"`
		} `json:"envelope"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &v), line)
	require.NotNil(t, v.Envelope.Text, "the admin API's view: the bytes as text when they are UTF-8: %s", line)
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(struct {
		fields
		Envelope string `json:"envelope"`
	}{v.fields, *v.Envelope.Text}))
	return strings.TrimSuffix(b.String(), "\n")
}
