package drivertest

import (
	"fmt"
	"testing"

	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// gatewayTests cover the gateway's methods, each in its own transaction.
var gatewayTests = []driverTest{
	{"GatewayEnvelope", testGatewayEnvelope},
	{"GatewayEnvelopePurge", testGatewayEnvelopePurge},
	{"GatewayTombstones", testGatewayTombstones},
	{"GatewayAccept", testGatewayAccept},
}

// keepEnvelope keeps the envelope of id, applied at at(n).
func (e *txEnv) keepEnvelope(id string, n int) {
	e.t.Helper()
	require.NoError(e.t, e.tx.GatewayEnvelopeInsert(e.ctx, store.GatewayEnvelope{Consumer: e.consumer, Source: "s", ID: id,
		Envelope: []byte(`{"id":"` + id + `"}`), BusinessKey: "bk", AppliedAt: at(n)}))
}

// envelope reads the kept envelope of id; nil when none.
func (e *txEnv) envelope(id string) []byte {
	e.t.Helper()
	env, err := e.tx.GatewayEnvelopeGet(e.ctx, store.MessageRef{Consumer: e.consumer, Source: "s", ID: id})
	if env == nil {
		require.ErrorIs(e.t, err, store.ErrNotFound)
	} else {
		require.NoError(e.t, err)
	}
	return env
}

func testGatewayEnvelope(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	require.Nil(t, e.envelope("1"))
	e.keepEnvelope("1", 1)
	require.NoError(t, e.tx.GatewayEnvelopeInsert(e.ctx, store.GatewayEnvelope{Consumer: e.consumer, Source: "s", ID: "1",
		Envelope: []byte(`second`), AppliedAt: at(2)}))
	require.Equal(t, []byte(`{"id":"1"}`), e.envelope("1"), "the first envelope stays")
	env, err := e.tx.GatewayEnvelopeGet(e.ctx, store.MessageRef{Consumer: e.consumer + "x", Source: "s", ID: "1"})
	require.ErrorIs(t, err, store.ErrNotFound, "another consumer's identity")
	require.Nil(t, env)
}

func testGatewayEnvelopePurge(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	for i, id := range []string{"1", "2", "3", "4"} {
		e.keepEnvelope(id, i+1)
	}
	purge := func(limit int) int64 {
		n, err := e.tx.GatewayEnvelopePurge(e.ctx, store.GatewayEnvelopePurgeParams{Consumer: e.consumer, Before: at(4), Now: at(10), Limit: limit})
		require.NoError(t, err)
		return n
	}
	require.EqualValues(t, 2, purge(2), "oldest first, at most Limit")
	require.Nil(t, e.envelope("1"))
	require.NotNil(t, e.envelope("3"))
	require.EqualValues(t, 1, purge(2), "only those applied before Before")
	require.NotNil(t, e.envelope("4"))
	n, err := e.tx.GatewayTombstoneCount(e.ctx, e.consumer)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "a tombstone each")
}

func testGatewayTombstones(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	for i, id := range []string{"1", "2", "3"} {
		e.keepEnvelope(id, i+1)
	}
	_, err := e.tx.GatewayEnvelopePurge(e.ctx, store.GatewayEnvelopePurgeParams{Consumer: e.consumer, Before: at(3), Now: at(10), Limit: 10})
	require.NoError(t, err)
	_, err = e.tx.GatewayEnvelopePurge(e.ctx, store.GatewayEnvelopePurgeParams{Consumer: e.consumer, Before: at(4), Now: at(20), Limit: 10})
	require.NoError(t, err)
	took, err := e.tx.GatewayTombstoneTake(e.ctx, store.GatewayTombstoneTakeParams{Consumer: e.consumer,
		IDs: []store.Identity{{Source: "s", ID: "1"}, {Source: "s", ID: "9"}}})
	require.NoError(t, err)
	require.EqualValues(t, 1, took, "only identities with a tombstone count")
	took, err = e.tx.GatewayTombstoneTake(e.ctx, store.GatewayTombstoneTakeParams{Consumer: e.consumer, IDs: []store.Identity{{Source: "s", ID: "1"}}})
	require.NoError(t, err)
	require.Zero(t, took, "taken once")
	purged, err := e.tx.GatewayTombstonePurge(e.ctx, store.GatewayTombstonePurgeParams{Consumer: e.consumer, Before: at(15)})
	require.NoError(t, err)
	require.EqualValues(t, 1, purged, "the tombstone of 2 (purged at 10); 3's is newer")
	n, err := e.tx.GatewayTombstoneCount(e.ctx, e.consumer)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

// testOperatorGatewayPurge purges through the pool, where the method
// runs its two statements in a transaction of its own.
func testOperatorGatewayPurge(t *testing.T, st store.Store) {
	o := newOp(t, st)
	o.commit(func(e *txEnv) {
		e.keepEnvelope("1", 1)
		e.keepEnvelope("2", 5)
	})
	n, err := o.op.GatewayEnvelopePurge(o.ctx, store.GatewayEnvelopePurgeParams{Consumer: o.consumer, Before: at(3), Now: at(10), Limit: 10})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	env, err := o.op.GatewayEnvelopeGet(o.ctx, store.MessageRef{Consumer: o.consumer, Source: "s", ID: "1"})
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Nil(t, env)
	took, err := o.op.GatewayTombstoneTake(o.ctx, store.GatewayTombstoneTakeParams{Consumer: o.consumer, IDs: []store.Identity{{Source: "s", ID: "1"}}})
	require.NoError(t, err)
	require.EqualValues(t, 1, took)
	purged, err := o.op.GatewayTombstonePurge(o.ctx, store.GatewayTombstonePurgeParams{Consumer: o.consumer, Before: at(100)})
	require.NoError(t, err)
	require.Zero(t, purged)
}

// GatewayAccept records an identity's first copy and names it to every
// later one, in the same call or another, whatever its payload; another
// consumer's identity is its own; the purge removes the oldest first.
func testGatewayAccept(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	cp := func(id, hash string, n int) store.GatewayCopy {
		return store.GatewayCopy{Source: "s", ID: id, PayloadHash: hash, At: at(n)}
	}
	accept := func(consumer string, copies ...store.GatewayCopy) []store.GatewayAccepted {
		t.Helper()
		got, err := e.tx.GatewayAccept(e.ctx, store.GatewayAcceptParams{Consumer: consumer, Copies: copies})
		require.NoError(t, err)
		return got
	}
	require.Equal(t, []store.GatewayAccepted{
		{New: true, First: cp("1", "h1", 1)},
		{New: true, First: cp("2", "h2", 1)},
		{First: cp("1", "h1", 1)},
	}, accept(e.consumer, cp("1", "h1", 1), cp("2", "h2", 1), cp("1", "h1", 1)), "a copy repeated in one call meets the first")
	require.Equal(t, []store.GatewayAccepted{
		{First: cp("1", "h1", 1)},
		{First: cp("2", "h2", 1)},
		{New: true, First: cp("3", "h3", 3)},
	}, accept(e.consumer, cp("1", "h1", 2), cp("2", "other", 2), cp("3", "h3", 3)), "later copies, of the same payload or another, meet the first")
	require.Equal(t, []store.GatewayAccepted{{New: true, First: cp("1", "h9", 4)}}, accept(e.consumer+"x", cp("1", "h9", 4)),
		"another consumer's identity is its own")

	purge := func(before, limit int) int64 {
		n, err := e.tx.GatewayAcceptedPurge(e.ctx, store.GatewayAcceptedPurgeParams{Consumer: e.consumer, Before: at(before), Limit: limit})
		require.NoError(t, err)
		return n
	}
	require.EqualValues(t, 1, purge(3, 1), "at most Limit")
	require.EqualValues(t, 1, purge(3, 5), "only those accepted before Before")
	require.Equal(t, []store.GatewayAccepted{{New: true, First: cp("1", "h1", 5)}, {First: cp("3", "h3", 3)}},
		accept(e.consumer, cp("1", "h1", 5), cp("3", "h3", 6)), "a purged identity is new again")
	n, err := e.tx.GatewayAcceptedPurge(e.ctx, store.GatewayAcceptedPurgeParams{Consumer: e.consumer + "x", Before: at(10), Limit: 10})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.EqualValues(t, 2, purge(10, 10))

	// Many copies at once, past a chunk, each identity three times: the
	// first of each is new, the others meet it.
	var many []store.GatewayCopy
	for round := range 3 {
		for i := range 300 {
			many = append(many, cp(fmt.Sprintf("m%d", i), fmt.Sprintf("h%d", i), 20+round))
		}
	}
	got := accept(e.consumer, many...)
	for i, a := range got {
		want := store.GatewayAccepted{New: i < 300, First: many[i%300]}
		require.Equal(t, want, a, "copy %d", i)
	}
}
