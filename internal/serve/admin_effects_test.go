package serve

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/stretchr/testify/require"
)

// The admin API lists the consumer's external calls and settles an
// uncertain one by hand; another consumer's calls are neither listed nor
// its to settle.
func TestAdminEffectsListAndResolve(t *testing.T) {
	r := start(t, Options{})
	ctx := context.Background()
	uncertain := func(consumer, id string) string {
		l, err := effects.New(r.store, effects.Config{})
		require.NoError(t, err)
		_, err = l.DoFor(ctx, seqboxtype.Identity{Consumer: consumer, Source: "crm", ID: id}, AgentAction,
			func(context.Context, string) (string, error) { return "", errors.New("connection reset by peer") })
		var unc *effects.UncertainError
		require.ErrorAs(t, err, &unc)
		return unc.IdempotencyKey
	}
	mine, theirs := uncertain(r.opt.Consumer, "evt-1"), uncertain("someone-else", "evt-2")

	body := r.admin(t, "GET", "/v1/admin/effects?state=uncertain", "", 200)
	require.Equal(t, r.opt.Consumer, body["consumer"])
	rows := list(t, body, "effects")
	require.Len(t, rows, 1)
	require.Equal(t, mine, rows[0]["idempotency_key"])
	require.Equal(t, "uncertain", rows[0]["state"])
	require.Empty(t, list(t, r.admin(t, "GET", "/v1/admin/effects?state=succeeded", "", 200), "effects"))
	require.Equal(t, "state", r.admin(t, "GET", "/v1/admin/effects?state=weird", "", 400)["field"])
	require.Equal(t, "limit", r.admin(t, "GET", "/v1/admin/effects?limit=0", "", 400)["field"])
	require.Equal(t, "limit", r.admin(t, "GET", "/v1/admin/effects?limit=10001", "", 400)["field"])
	// A limit that cuts the list says so: before, the rows past it were
	// left out without a word.
	third := uncertain(r.opt.Consumer, "evt-3")
	body = r.admin(t, "GET", "/v1/admin/effects?limit=1", "", 200)
	require.Len(t, list(t, body, "effects"), 1, "the row read to learn of more is not sent")
	require.Equal(t, []any{mine, true}, []any{list(t, body, "effects")[0]["idempotency_key"], body["more"]}, "the oldest change first, and more")
	body = r.admin(t, "GET", "/v1/admin/effects?limit=2", "", 200)
	require.Len(t, list(t, body, "effects"), 2)
	require.Equal(t, []any{third, false}, []any{list(t, body, "effects")[1]["idempotency_key"], body["more"]})
	r.admin(t, "POST", "/v1/admin/effects/"+url.PathEscape(third)+"/resolve", `{"state":"failed","by":"ana","reason":"test row"}`, 200)
	code, _, _ := r.call(t, "GET", "/v1/admin/effects", "", nil, "")
	require.Equal(t, 401, code)

	resolve := func(key string) string { return "/v1/admin/effects/" + url.PathEscape(key) + "/resolve" }
	require.Contains(t, r.admin(t, "POST", resolve(mine), `{"state":"succeeded","by":"ana","reason":"seen"}`, 400)["detail"], "--ref")
	require.Contains(t, r.admin(t, "POST", resolve(mine), `{"state":"done","by":"ana","reason":"seen"}`, 400)["detail"], "succeeded or failed")
	require.Contains(t, r.admin(t, "POST", resolve(mine), `{"state":"failed"}`, 400)["detail"], "--by and --reason")
	require.Equal(t, "body", r.admin(t, "POST", resolve(mine), `{"state":"failed","who":"ana"}`, 400)["field"])
	require.Contains(t, r.admin(t, "POST", resolve(theirs), `{"state":"failed","by":"ana","reason":"x"}`, 404)["detail"], "no uncertain call")
	code, _, _ = r.call(t, "POST", resolve(mine), "", nil, `{"state":"failed","by":"ana","reason":"x"}`)
	require.Equal(t, 401, code)

	got := r.admin(t, "POST", resolve(mine), `{"state":"succeeded","ref":"task-7","by":"ana","reason":"found it in the CRM"}`, 200)
	// The one view of a resolved call (EffectResolved, which effects
	// resolve -o json prints) carries ref and reason too: the fields
	// asserted here are projected.
	got = map[string]any{"idempotency_key": got["idempotency_key"], "state": got["state"], "by": got["by"]}
	require.Equal(t, map[string]any{"idempotency_key": mine, "state": "succeeded", "by": "ana"}, got)
	rows = list(t, r.admin(t, "GET", "/v1/admin/effects?state=succeeded&action=agent", "", 200), "effects")
	require.Len(t, rows, 1)
	require.Equal(t, "task-7", rows[0]["ref"])
	require.Contains(t, r.admin(t, "POST", resolve(mine), `{"state":"failed","by":"ana","reason":"x"}`, 404)["detail"], "no uncertain call")
}
