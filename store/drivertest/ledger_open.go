package drivertest

import (
	"errors"
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// testLedgerOpen: an identity's call is open while its row is pending (in
// flight, or its caller died mid-call) or uncertain, and not once it
// succeeded or failed; another identity's or consumer's row is not its.
// keys release and skip refuse a turn whose call is open (ErrCallOpen): a
// hand-made SQL mutant that read only uncertain rows as open, so that a
// turn could be released under a call in flight, lived through every
// suite before this test.
func testLedgerOpen(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	open := func(consumer, id string) (store.OpenCall, bool) {
		t.Helper()
		c, err := e.tx.LedgerOpen(e.ctx, store.MessageRef{Consumer: consumer, Source: "s", ID: id})
		if errors.Is(err, store.ErrNotFound) {
			return c, false
		}
		require.NoError(t, err)
		return c, true
	}
	_, found := open(e.consumer, "1")
	require.False(t, found, "no row")
	key := e.insertEffect("a", 1)
	c, found := open(e.consumer, "1")
	require.True(t, found, "pending: in flight, or its caller died")
	require.Equal(t, store.OpenCall{IdempotencyKey: key, State: "pending"}, c)
	_, found = open(e.consumer, "2")
	require.False(t, found, "another identity's row")
	_, found = open(e.consumer+"-other", "1")
	require.False(t, found, "another consumer's row")
	for _, tc := range []struct {
		to   seqboxtype.Effect
		open bool
	}{{seqboxtype.EffectUncertain, true}, {seqboxtype.EffectSucceeded, false}, {seqboxtype.EffectFailed, false}} {
		require.NoError(t, e.tx.EffectRecord(e.ctx, store.EffectRecordParams{IdempotencyKey: key, To: tc.to, At: at(2),
			From: []seqboxtype.Effect{seqboxtype.EffectPending, seqboxtype.EffectUncertain, seqboxtype.EffectSucceeded}}))
		c, found = open(e.consumer, "1")
		require.Equal(t, tc.open, found, "%s", tc.to)
		if tc.open {
			require.Equal(t, store.OpenCall{IdempotencyKey: key, State: string(tc.to)}, c)
		}
	}
}
