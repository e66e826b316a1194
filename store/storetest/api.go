package storetest

import (
	"context"
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/stretchr/testify/require"
)

// exerciseAPI covers the ways of delivering besides Deliver and Run.
func exerciseAPI(t *testing.T, open Factory) {
	t.Run("DeliverTxCommitsWithTheCaller", func(t *testing.T) { apiDeliverTx(t, open) })
}

// DeliverTx records in the caller's transaction: a rollback forgets the
// delivery and the caller's own write together; a commit keeps both, and
// a redelivery is then a duplicate.
func apiDeliverTx(t *testing.T, open Factory) {
	b := setupInbox(t, open)
	ctx := context.Background()
	_, err := b.st.DB().ExecContext(ctx, `CREATE TABLE webhook_log (id TEXT NOT NULL)`)
	require.NoError(t, err)
	c := b.consumer()
	raw := []byte(`{"id":"w-1","source":"stripe","type":"charge.succeeded"}`)
	logged := func() int {
		var n int
		require.NoError(t, b.st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_log`).Scan(&n))
		return n
	}

	for _, commit := range []bool{false, true} {
		tx, err := b.st.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, `INSERT INTO webhook_log (id) VALUES ('w-1')`)
		require.NoError(t, err)
		results, err := c.DeliverTx(ctx, tx, raw, 1)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.Applied, results[0].Outcome, "rolled back before: still new (commit=%v)", commit)
		if commit {
			require.NoError(t, tx.Commit())
		} else {
			require.NoError(t, tx.Rollback())
			require.Zero(t, b.effectCount(""), "a rollback forgets the effect")
			require.Zero(t, logged())
		}
	}
	require.Equal(t, 1, b.effectCount(""))
	require.Equal(t, 1, logged())
	require.Equal(t, seqboxtype.Duplicate, deliver(t, c, raw, 2).Outcome)
}
