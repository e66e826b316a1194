package seqbox_test

import (
	"context"
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/stretchr/testify/require"
)

// DeliverTx with no transaction is refused before anything is written.
// Before, its statements ran on the pool, each committing on its own: the
// identity was recorded with no outcome and the handler's row was lost,
// so every later copy was a duplicate of an effect that never happened.
func TestDeliverTxWithoutATransactionIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.consumer(t)
	ev := []byte(`{"specversion":"1.0","id":"tx2","source":"crm","type":"t","partitionkey":"T2","objectversion":1}`)
	_, err := c.DeliverTx(context.Background(), nil, ev, 1)
	require.ErrorContains(t, err, "DeliverTx: tx is nil")
	require.Zero(t, b.inboxRows(t))
	results, err := c.Deliver(context.Background(), ev, 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Applied, results[0].Outcome)
	require.Equal(t, 1, b.effects(t, "tx2"))
}
