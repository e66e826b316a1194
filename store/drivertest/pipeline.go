package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// pipelines reports whether st's transactions are store.Pipeliners.
func pipelines(t *testing.T, st store.Store) bool {
	tx, err := st.Begin(context.Background())
	require.NoError(t, err)
	defer tx.Rollback()
	_, ok := tx.(store.Pipeliner)
	return ok
}

// A store whose transactions pipeline (store.Pipeliner) runs the
// statements in order in the transaction, says the rows each affected,
// and on a failure names the statement and keeps the rows of those
// before it.
func testPipeline(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	pl := e.tx.(store.Pipeliner)
	ins := `INSERT INTO seqbox_decisions (consumer, source, id, decision, decided_at) VALUES ($1, 'crm', $2, $3, 0)`
	affected, err := pl.Pipeline(e.ctx, []store.Statement{
		{Query: ins, Args: []any{e.consumer, "1", []byte("one")}},
		{Query: ins, Args: []any{e.consumer, "2", []byte("two")}},
		{Query: `UPDATE seqbox_decisions SET decided_at = 1 WHERE consumer = $1`, Args: []any{e.consumer}},
	})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 1, 2}, affected)
	d, err := e.tx.DecisionGet(e.ctx, store.MessageRef{Consumer: e.consumer, Source: "crm", ID: "2"})
	require.NoError(t, err)
	require.Equal(t, []byte("two"), d, "the pipeline ran in the transaction")

	affected, err = pl.Pipeline(e.ctx, []store.Statement{
		{Query: ins, Args: []any{e.consumer, "3", []byte("three")}},
		{Query: ins, Args: []any{e.consumer, "1", []byte("again")}},
		{Query: ins, Args: []any{e.consumer, "4", []byte("four")}},
	})
	var pe *store.PipelineError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 1, pe.Index)
	require.Equal(t, ins, pe.Query)
	require.Equal(t, []int64{1}, affected)
}

// AuditStatement, sent in a pipeline, writes what AuditInsert writes: an
// audit row, or a duplicate's count on its inbox row.
func testPipelineAudit(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	pl := e.tx.(store.Pipeliner)
	_, err := e.tx.InboxInsert(e.ctx, e.inboxRow("crm", "1", 1))
	require.NoError(t, err)
	at := time.UnixMicro(time.Now().UnixMicro()).UTC()
	v1, v2 := int64(1), int64(2)
	stale := store.AuditRow{Consumer: e.consumer, Source: "crm", ID: "0", PartitionKey: "k", ReceivedVersion: &v1, CurrentVersion: &v2,
		Outcome: seqboxtype.Stale, Reason: "older", NextAction: "none", At: at, PayloadHash: "h"}
	dup := store.AuditRow{Consumer: e.consumer, Source: "crm", ID: "1", Outcome: seqboxtype.Duplicate, At: at}
	affected, err := pl.Pipeline(e.ctx, []store.Statement{pl.AuditStatement(stale), pl.AuditStatement(dup), pl.AuditStatement(dup)})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 1, 1}, affected)
	require.Equal(t, []store.AuditRow{stale}, e.auditRows())
	n, last := e.duplicates("crm", "1")
	require.Equal(t, 2, n)
	require.Equal(t, at, last)
}
