package drivertest

import (
	"database/sql"
	"testing"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// SQL is the batch transaction itself: what the handler writes through it
// the store's methods read, and the other way round.
func testSQL(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	require.NotNil(t, e.tx.SQL())
	_, err := e.tx.SQL().ExecContext(e.ctx, `INSERT INTO seqbox_decisions (consumer, source, id, decision, decided_at)
		VALUES ($1, 'crm', '1', $2, 0)`, e.consumer, []byte("written by the handler"))
	require.NoError(t, err)
	d, err := e.tx.DecisionGet(e.ctx, store.MessageRef{Consumer: e.consumer, Source: "crm", ID: "1"})
	require.NoError(t, err)
	require.Equal(t, []byte("written by the handler"), d.Value)

	_, err = e.tx.InboxInsert(e.ctx, e.inboxRow("crm", "2", 2))
	require.NoError(t, err)
	require.Equal(t, 1, e.count("seqbox_inbox", "id = $2", "2"))
}

// A savepoint undoes what followed it and stays open; releasing it keeps
// the work; nested savepoints unwind to the one named. A savepoint
// released can no longer be rolled back to.
func testSavepoints(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	insert := func(id string) {
		t.Helper()
		ok, err := tx.InboxInsert(ctx, e.inboxRow("crm", id, 1))
		require.NoError(t, err)
		require.True(t, ok, id)
	}
	ids := func() []string {
		t.Helper()
		return column[string](t)(tx.SQL().QueryContext(ctx, `SELECT id FROM seqbox_inbox WHERE consumer = $1 ORDER BY id`, e.consumer))
	}

	insert("0")
	require.NoError(t, tx.Savepoint(ctx, "delivery_1"))
	insert("1")
	require.NoError(t, tx.SavepointRollback(ctx, "delivery_1"))
	require.Equal(t, []string{"0"}, ids(), "rolled back to the savepoint")
	insert("1") // the identity is new again
	require.NoError(t, tx.SavepointRollback(ctx, "delivery_1"))
	require.Equal(t, []string{"0"}, ids(), "the savepoint stays open after a rollback to it")
	insert("2")
	require.NoError(t, tx.SavepointRelease(ctx, "delivery_1"))
	require.Equal(t, []string{"0", "2"}, ids(), "a released savepoint keeps its work")

	require.NoError(t, tx.Savepoint(ctx, "sp_outer"))
	insert("3")
	require.NoError(t, tx.Savepoint(ctx, "sp_inner"))
	insert("4")
	require.NoError(t, tx.SavepointRollback(ctx, "sp_inner"))
	require.Equal(t, []string{"0", "2", "3"}, ids())
	insert("5")
	require.NoError(t, tx.SavepointRollback(ctx, "sp_outer"))
	require.Equal(t, []string{"0", "2"}, ids(), "rolling back to the outer savepoint undoes the inner one")
	insert("6")
	require.NoError(t, tx.Savepoint(ctx, "sp_inner"))
	insert("7")
	require.NoError(t, tx.SavepointRelease(ctx, "sp_outer"), "releasing the outer savepoint releases the inner one")
	require.Equal(t, []string{"0", "2", "6", "7"}, ids())

	// Last: on PostgreSQL the failed statement aborts the transaction.
	require.Error(t, tx.SavepointRollback(ctx, "sp_inner"), "a released savepoint is gone")
}

// Rollback forgets everything the transaction wrote and gives the
// writer's turn back; a second Rollback is an error, not a hang.
func testRollbackDiscards(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	_, err := tx.InboxInsert(ctx, e.inboxRow("crm", "1", 1))
	require.NoError(t, err)
	require.NoError(t, tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: e.consumer, Key: "order-1", At: at(1)}))
	require.NoError(t, tx.ParkedInsert(ctx, e.parked("order-1", "crm", "1", nil, seqboxtype.ParkHeld, 1)))
	require.NoError(t, tx.Rollback())
	require.ErrorIs(t, tx.Rollback(), sql.ErrTxDone)

	tx2, err := st.Begin(ctx) // would wait forever if the turn were not given back
	require.NoError(t, err)
	defer func() { require.NoError(t, tx2.Rollback()) }()
	_, err = tx2.InboxGet(ctx, store.MessageRef{Consumer: e.consumer, Source: "crm", ID: "1"})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = tx2.KeyLock(ctx, store.KeyRef{Consumer: e.consumer, Key: "order-1"})
	require.ErrorIs(t, err, store.ErrNotFound)
	ps, err := tx2.ParkedListInLine(ctx, store.KeyRef{Consumer: e.consumer, Key: "order-1"})
	require.NoError(t, err)
	require.Empty(t, ps)
}
