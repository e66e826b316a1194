package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

// uncertainCall leaves one uncertain call in a fresh database and returns
// the database and the call's idempotency key.
func uncertainCall(t *testing.T) (string, string) {
	db := newDB(t)
	st, err := sqlite.Open(context.Background(), db)
	require.NoError(t, err)
	defer st.Close()
	l, err := effects.New(st, effects.Config{})
	require.NoError(t, err)
	id := seqboxtype.Identity{Consumer: "crm-worker", Source: "crm", ID: "evt-482"}
	_, err = l.DoFor(context.Background(), id, "crm.create_task", func(context.Context, string) (string, error) {
		return "", errors.New("connection reset by peer")
	})
	var unc *effects.UncertainError
	require.ErrorAs(t, err, &unc)
	return db, unc.IdempotencyKey
}

func TestEffectsListAndResolve(t *testing.T) {
	t.Parallel()
	db, key := uncertainCall(t)
	out := ok(t, "effects", "list", "--db", db, "--state", "uncertain")
	require.Contains(t, out, key)
	require.Contains(t, out, "connection reset by peer")
	var row effects.Effect
	require.NoError(t, json.Unmarshal([]byte(ok(t, "effects", "list", "--db", db, "--json")), &row))
	require.Equal(t, effects.Uncertain, row.State)
	require.Equal(t, "crm.create_task", row.Action)

	require.Contains(t, fails(t, "effects", "resolve", key, "--db", db, "--state", "succeeded", "--by", "ana", "--reason", "seen"), "--ref")
	require.Contains(t, fails(t, "effects", "resolve", key, "--db", db, "--state", "done", "--by", "ana", "--reason", "seen"), `--state "done"`)
	require.Contains(t, fails(t, "effects", "resolve", key, "--db", db, "--state", "failed"), "--by and --reason")
	require.Contains(t, fails(t, "effects", "resolve", "sbx-nope", "--db", db, "--state", "failed", "--by", "ana", "--reason", "x"), "no call")
	require.Contains(t, fails(t, "effects", "list", "--db", db, "--state", "weird"), "not one of")

	require.Equal(t, key+" resolved succeeded by ana\n",
		ok(t, "effects", "resolve", key, "--db", db, "--state", "succeeded", "--ref", "task-7", "--by", "ana", "--reason", "found it in the CRM"))
	out = ok(t, "effects", "list", "--db", db, "--state", "succeeded")
	require.Contains(t, out, "task-7")
	require.Equal(t, "no external calls recorded\n", ok(t, "effects", "list", "--db", db, "--state", "uncertain"))
	require.True(t, strings.Contains(fails(t, "effects", "resolve", key, "--db", db, "--state", "failed", "--by", "ana", "--reason", "x"), "not uncertain"))
}
