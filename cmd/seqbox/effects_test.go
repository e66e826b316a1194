package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

// uncertainCallIn leaves one uncertain call of consumer in db and returns
// its idempotency key.
func uncertainCallIn(t *testing.T, db, consumer, id string) string {
	st, err := sqlite.Open(context.Background(), db)
	require.NoError(t, err)
	defer st.Close()
	l, err := effects.New(st, effects.Config{})
	require.NoError(t, err)
	_, err = l.DoFor(context.Background(), seqboxtype.Identity{Consumer: consumer, Source: "crm", ID: id}, "crm.create_task",
		func(context.Context, string) (string, error) { return "", errors.New("connection reset by peer") })
	var unc *effects.UncertainError
	require.ErrorAs(t, err, &unc)
	return unc.IdempotencyKey
}

func TestEffectsListAndResolve(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	key := uncertainCallIn(t, db, "crm-worker", "evt-482")
	// crm-worker used the ledger on its own and never registered: without
	// --consumer there is no consumer to select.
	require.Contains(t, fails(t, "effects", "list", "--db", db), "--consumer")
	sel := []string{"--db", db, "--consumer", "crm-worker"}
	run := func(check func(*testing.T, ...string) string, args ...string) string {
		t.Helper()
		return check(t, append(args, sel...)...)
	}
	out := run(ok, "effects", "list", "--state", "uncertain")
	require.Contains(t, out, key)
	require.Contains(t, out, "connection reset by peer")
	var row effects.Effect
	require.NoError(t, json.Unmarshal([]byte(run(ok, "effects", "list", "--json")), &row))
	require.Equal(t, effects.Uncertain, row.State)
	require.Equal(t, "crm.create_task", row.Action)

	require.Contains(t, run(fails, "effects", "resolve", key, "--state", "succeeded", "--by", "ana", "--reason", "seen"), "--ref")
	require.Contains(t, run(fails, "effects", "resolve", key, "--state", "done", "--by", "ana", "--reason", "seen"), `--state "done"`)
	require.Contains(t, run(fails, "effects", "resolve", key, "--state", "failed"), "--by and --reason")
	require.Contains(t, run(fails, "effects", "resolve", "sbx-nope", "--state", "failed", "--by", "ana", "--reason", "x"), "no uncertain call")
	require.Contains(t, run(fails, "effects", "list", "--state", "weird"), "not one of")
	require.Contains(t, fails(t, "effects", "list", "--db", db, "--consumer", "nobody"), `--consumer "nobody"`)
	require.Contains(t, fails(t, "effects", "bogus"), `unknown command "bogus"`)
	require.Contains(t, fails(t, "effects", "resolve", "--db", db), "effects resolve: expects one IDEMPOTENCY-KEY argument")

	require.Equal(t, key+" resolved succeeded by ana\n",
		run(ok, "effects", "resolve", key, "--state", "succeeded", "--ref", "task-7", "--by", "ana", "--reason", "found it in the CRM"))
	out = run(ok, "effects", "list", "--state", "succeeded")
	require.Contains(t, out, "task-7")
	require.Equal(t, "no external calls recorded\n", run(ok, "effects", "list", "--state", "uncertain"))
	require.Contains(t, run(fails, "effects", "resolve", key, "--state", "failed", "--by", "ana", "--reason", "x"), "no uncertain call")
}

// effects list says on standard error when --limit left rows out: before,
// the rows past it were dropped without a word.
func TestEffectsListSaysWhenTheLimitCutsIt(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	first := uncertainCallIn(t, db, "crm-worker", "evt-1")
	second := uncertainCallIn(t, db, "crm-worker", "evt-2")
	r := exe(t, "", "effects", "list", "--db", db, "--consumer", "crm-worker", "--limit", "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, first)
	require.NotContains(t, r.stdout, second)
	require.Equal(t, "seqbox: effects list: the oldest change shown; more match (raise --limit, or narrow with --state or --action)\n", r.stderr)
	out := ok(t, "effects", "list", "--db", db, "--consumer", "crm-worker", "--limit", "2")
	require.Contains(t, out, second, "nothing left out, nothing said")
}

// --consumer selects the consumer, as in every other command: the only
// registered one by default, and another consumer's calls are neither
// listed nor resolved.
func TestEffectsConsumerSelects(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ok(t, "replay", "--db", db, "--consumer", "billing", fixture(t, "outcomes.jsonl"))
	mine := uncertainCallIn(t, db, "billing", "evt-1")
	theirs := uncertainCallIn(t, db, "crm-worker", "evt-2")
	out := ok(t, "effects", "list", "--db", db)
	require.Contains(t, out, mine)
	require.NotContains(t, out, theirs)
	out = ok(t, "effects", "list", "--db", db, "--consumer", "crm-worker")
	require.Contains(t, out, theirs)
	require.NotContains(t, out, mine)
	require.Contains(t, fails(t, "effects", "resolve", theirs, "--db", db, "--state", "failed", "--by", "ana", "--reason", "x"),
		`consumer "billing" has no uncertain call`)
	require.Equal(t, theirs+" resolved failed by ana\n",
		ok(t, "effects", "resolve", theirs, "--db", db, "--consumer", "crm-worker", "--state", "failed", "--by", "ana", "--reason", "x"))
}

// effects list and resolve with --server print what the database path
// prints, for the gateway's consumer.
func TestEffectsServer(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "seqbox.db")
	s := startServe(t, nil, "--db", db, "--admin-token", serveToken)
	s.event(t, ce("k1", "K", 1, ""))
	waitUntil(t, "k1 applied", func() bool { return s.outcome(t, "k1") == "applied" })
	key := uncertainCallIn(t, db, "gateway", "evt-9")
	uncertainCallIn(t, db, "crm-worker", "evt-10")
	remote := []string{"--server", s.url, "--admin-token", serveToken}
	for _, args := range [][]string{{"effects", "list", "--json"}, {"effects", "list", "--state", "uncertain", "--json"},
		{"effects", "list", "--output", "json"}} {
		require.Equal(t, ok(t, append(args, "--db", db)...), ok(t, append(args, remote...)...), "seqbox %s", strings.Join(args, " "))
	}
	require.Contains(t, ok(t, append([]string{"effects", "list"}, remote...)...), key)
	require.Contains(t, fails(t, append([]string{"effects", "list", "--state", "weird"}, remote...)...), "not one of")
	require.Contains(t, fails(t, append([]string{"effects", "list", "--consumer", "crm-worker"}, remote...)...), `serves consumer "gateway"`)
	require.Contains(t, fails(t, "effects", "list", "--server", s.url), "admin token")
	require.Contains(t, fails(t, append([]string{"effects", "resolve", key, "--state", "succeeded", "--by", "ana", "--reason", "x"}, remote...)...), "--ref")
	require.Contains(t, fails(t, append([]string{"effects", "resolve", "sbx-nope", "--state", "failed", "--by", "ana", "--reason", "x"}, remote...)...), "no uncertain call")
	require.Equal(t, key+" resolved succeeded by ana\n",
		ok(t, append([]string{"effects", "resolve", key, "--state", "succeeded", "--ref", "task-7", "--by", "ana", "--reason", "seen"}, remote...)...))
	require.Contains(t, ok(t, "effects", "list", "--db", db, "--state", "succeeded"), "task-7")
}
