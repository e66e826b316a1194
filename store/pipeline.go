package store

import (
	"context"
	"fmt"
)

// Statement is one statement of a pipeline: its text and its arguments.
type Statement struct {
	// Query is the statement's SQL text.
	Query string
	// Args are the values of its placeholders, in order.
	Args []any
	// Read, when set, reads the rows the statement returns (a SELECT, or
	// RETURNING) as the pipeline's answers arrive; its affected count is
	// then the rows it returned. A Read that fails fails the pipeline at
	// this statement.
	Read func(Rows) error
}

// Rows are the rows a pipeline's statement returned, handed to its Read:
// Next and Scan as database/sql's Rows.
type Rows interface {
	// Next moves to the next row; false when there is none left or
	// reading failed (Err says which).
	Next() bool
	// Scan copies the current row's columns into dest.
	Scan(dest ...any) error
	// Err is the error that ended the rows; nil when all were read.
	Err() error
}

// Pipeliner is an ExecutorTx that can send many statements to the
// database together, in one round trip, instead of one round trip each
// (PostgreSQL's pipeline mode). A store's Begin may return one; an
// ExecutorTx that is not a Pipeliner runs statements one at a time.
type Pipeliner interface {
	ExecutorTx
	// Pipeline runs stmts in order in the transaction and returns the rows
	// each one affected. When one fails, affected holds the rows of the
	// ones before it, err is a *PipelineError naming it, and the
	// transaction can only roll back.
	Pipeline(ctx context.Context, stmts []Statement) (affected []int64, err error)
	// AuditStatement is the statement AuditInsert runs for a, for a
	// pipeline: an audit row (or a duplicate's count) is written and
	// never read back in the transaction, so it can wait for the next
	// Pipeline.
	AuditStatement(a AuditRow) Statement
	// KeyLockInsertMany is KeyLockMany then InboxInsertMany, the start of
	// a batch, and then the statements then, sent together: one round
	// trip where the two take three (the keys' locks, their flags read
	// once the locks are granted, the identities) and then one more each.
	// It returns what the two return; then's statements read their own
	// rows.
	KeyLockInsertMany(ctx context.Context, p KeyLockManyParams, rows []InboxRow, then ...Statement) (map[string]KeyState, []bool, error)
	// RetryRowsStatement is RetryRowsOnKeys' statement for p, its rows
	// read into out.
	RetryRowsStatement(p KeysRef, out map[string][]Identity) Statement
	// DecisionsStatement is DecisionGetMany's statement for p, its rows
	// read into out.
	DecisionsStatement(p IdentitiesRef, out map[Identity]Decision) Statement
	// TurnsBoundStatement is TurnBoundToMany's statement for p, its rows
	// read into out.
	TurnsBoundStatement(p IdentitiesRef, out map[Identity]string) Statement
	// InboxDeleteStatement is InboxDeleteMany's statement for p.
	InboxDeleteStatement(p IdentitiesRef) Statement
	// GatewayEnvelopeStatement is GatewayEnvelopeInsert's statement for
	// e: written, and never read back in the transaction that applies its
	// event.
	GatewayEnvelopeStatement(e GatewayEnvelope) Statement
	// RetryClearStatement is RetryClearMany's statement for p.
	RetryClearStatement(p RetryClearManyParams) Statement
	// TurnTakeStatement is TurnTakeMany's write for p: it marks in taken
	// the turns it took, and reads nothing of those it did not (their
	// turns are bound to another copy).
	TurnTakeStatement(p TurnTakeManyParams, taken map[Identity]bool) Statement
	// DecisionClaimStatement is DecisionClaimMany's statement for p: it
	// marks in claimed the identities it claimed.
	DecisionClaimStatement(p DecisionClaimManyParams, claimed map[Identity]bool) Statement
	// KeyAdvanceStatement is KeyAdvanceMany's statement for p, for a
	// pipeline: the rows it affects are the moves it won (each key moved
	// at most once).
	KeyAdvanceStatement(p KeyAdvanceManyParams) Statement
}

// PipelineError is the failure of one statement of a pipeline.
type PipelineError struct {
	// Index is the failed statement's position in the pipeline.
	Index int
	// Query is its text.
	Query string
	// Err is the database's error for it.
	Err error
}

// Error implements error: the statement's Index, its Query and Err.
func (e *PipelineError) Error() string {
	return fmt.Sprintf("statement %d of a pipeline (%s): %v", e.Index, e.Query, e.Err)
}

// Unwrap returns the database's error.
func (e *PipelineError) Unwrap() error { return e.Err }
