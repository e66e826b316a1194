package sqlstore

import (
	"context"
	"database/sql"

	"github.com/seqbox/seqbox/store"
)

// pipeTx is a batch transaction opened on a connection of its own, so that
// the dialect's Pipeline can reach the driver's connection under it
// (Dialect.Pipeline, which the Executor's pipeline calls). It is a
// store.Pipeliner.
type pipeTx struct {
	*Executor
	conn *sql.Conn
}

var _ store.Pipeliner = (*pipeTx)(nil)

// beginPipe opens a transaction on a connection taken from the pool for it.
func (s *Store) beginPipe(ctx context.Context) (*pipeTx, error) {
	// ctx bounds the wait for a connection; as in Begin, the transaction
	// itself outlives it.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	e := s.executor(tx)
	pipe := s.dialect.Pipeline
	e.pipeline = func(ctx context.Context, stmts []store.Statement) ([]int64, error) {
		return pipe(ctx, conn, stmts)
	}
	return &pipeTx{Executor: e, conn: conn}, nil
}

// Pipeline runs stmts in the transaction with one round trip.
func (t *pipeTx) Pipeline(ctx context.Context, stmts []store.Statement) ([]int64, error) {
	if len(stmts) == 0 {
		return nil, nil
	}
	return t.pipelined(ctx, stmts)
}

// spelled is st spelled for the dialect.
func (t *pipeTx) spelled(st store.Statement) store.Statement {
	st.Query, st.Args = t.spell(st.Query, st.Args)
	return st
}

// AuditStatement is AuditInsert's statement, spelled for the dialect.
func (t *pipeTx) AuditStatement(a store.AuditRow) store.Statement {
	return t.spelled(auditStatement(a))
}

// KeyAdvanceStatement is KeyAdvanceMany's statement, spelled for the
// dialect.
func (t *pipeTx) KeyAdvanceStatement(p store.KeyAdvanceManyParams) store.Statement {
	return t.spelled(keyAdvanceStatement(p))
}

// RetryRowsStatement is RetryRowsOnKeys' statement, read into out.
func (t *pipeTx) RetryRowsStatement(p store.KeysRef, out map[string][]store.Identity) store.Statement {
	return t.spelled(retryRowsArrays(p.Consumer, sortedUnique(p.Keys), out))
}

// DecisionsStatement is DecisionGetMany's statement, read into out.
func (t *pipeTx) DecisionsStatement(p store.IdentitiesRef, out map[store.Identity]store.Decision) store.Statement {
	return t.spelled(readManyArrays(p, decisionsRead(out)))
}

// TurnsBoundStatement is TurnBoundToMany's statement, read into out.
func (t *pipeTx) TurnsBoundStatement(p store.IdentitiesRef, out map[store.Identity]string) store.Statement {
	return t.spelled(readManyArrays(p, turnsBoundRead(out)))
}

// InboxDeleteStatement is InboxDeleteMany's statement.
func (t *pipeTx) InboxDeleteStatement(p store.IdentitiesRef) store.Statement {
	return t.spelled(deleteManyArrays("seqbox_inbox", p.Consumer, p.IDs))
}

// GatewayEnvelopeStatement is GatewayEnvelopeInsert's statement.
func (t *pipeTx) GatewayEnvelopeStatement(e store.GatewayEnvelope) store.Statement {
	return t.spelled(gatewayEnvelopeStatement(e))
}

// RetryClearStatement is RetryClearMany's statement.
func (t *pipeTx) RetryClearStatement(p store.RetryClearManyParams) store.Statement {
	return t.spelled(deleteManyArrays("seqbox_retries", p.Consumer, p.IDs))
}

// TurnTakeStatement is TurnTakeMany's statement without its second look:
// it marks in taken the turns it took.
func (t *pipeTx) TurnTakeStatement(p store.TurnTakeManyParams, taken map[store.Identity]bool) store.Statement {
	return t.spelled(turnTakeArrays(p.Consumer, p.At, uniqueTurns(p.Turns), taken))
}

// DecisionClaimStatement is DecisionClaimMany's statement: it marks in
// claimed the identities it claimed.
func (t *pipeTx) DecisionClaimStatement(p store.DecisionClaimManyParams, claimed map[store.Identity]bool) store.Statement {
	return t.spelled(decisionClaimArrays(p, uniqueIdentities(p.IDs), claimed))
}

// Commit commits and gives the connection back to the pool.
func (t *pipeTx) Commit() error {
	defer t.conn.Close()
	return t.Executor.Commit()
}

// Rollback rolls back and gives the connection back to the pool.
func (t *pipeTx) Rollback() error {
	defer t.conn.Close()
	return t.Executor.Rollback()
}
