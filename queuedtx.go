package seqbox

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"time"

	"github.com/seqbox/seqbox/store"
)

// queuedTx is the Handler's Tx in the optimistic run of a batch on a store
// that pipelines (store.Pipeliner: PostgreSQL). Its writes are queued and
// sent together, one round trip for all the handlers of the batch, instead
// of a round trip each (docs/design.md §5, "Handler writes in one round
// trip"):
//
//   - ExecContext queues the statement and returns at once, without an
//     error; its arguments are copied where a handler could change them
//     afterwards (slices, pointers to plain values). A statement without
//     arguments runs at once, after the queue.
//   - Anything that needs an answer sends the queue first: a read
//     (QueryContext, QueryRowContext), the RowsAffected or LastInsertId
//     of a queued statement, and the end of the run, before its commit.
//
// When a queued statement fails, the transaction is dead, and the batch
// rolls back and runs again with savepoints (errRerun), where each
// handler's statements run one by one and each sees its own errors. What
// commits is therefore what the same handlers would have committed one
// statement at a time.
type queuedTx struct {
	pl    store.Pipeliner
	sql   *sql.Tx
	ctx   context.Context
	stmts []store.Statement
	// affected holds the rows each sent statement affected, in order: a
	// statement's position is its index here once sent.
	affected []int64
	// err is the first failure of a send: the run is over (errRerun).
	err error
}

// maxQueued bounds the statements queued before they are sent anyway.
const maxQueued = 1024

var _ Tx = (*queuedTx)(nil)

// newQueuedTx returns the queue of the optimistic run of a batch in tx, or
// nil when its store does not pipeline. ctx is the batch's: sends run
// under it.
func newQueuedTx(ctx context.Context, tx store.ExecutorTx) *queuedTx {
	pl, ok := tx.(store.Pipeliner)
	if !ok {
		return nil
	}
	return &queuedTx{pl: pl, sql: tx.SQL(), ctx: ctx}
}

// ExecContext queues the statement. One without arguments runs at once,
// after the queue: it may be several statements in one text, which only
// the simple protocol takes, or a handler's own SAVEPOINT.
func (q *queuedTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if len(args) == 0 {
		if err := q.send(); err != nil {
			return nil, err
		}
		return q.sql.ExecContext(ctx, query)
	}
	own := make([]any, len(args))
	for i, a := range args {
		own[i] = frozen(a)
	}
	n, err := q.add(store.Statement{Query: query, Args: own})
	if err != nil {
		return nil, err
	}
	return queuedResult{q: q, n: n}, nil
}

// add queues st (seqbox's own writes that are never read back in the
// batch go here too: batchTx.AuditInsert) and returns its position.
func (q *queuedTx) add(st store.Statement) (int, error) {
	if q.err != nil {
		return 0, q.err
	}
	q.stmts = append(q.stmts, st)
	n := len(q.affected) + len(q.stmts) - 1
	if len(q.stmts) >= maxQueued {
		return n, q.send()
	}
	return n, nil
}

// QueryContext sends the queue, then reads.
func (q *queuedTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := q.send(); err != nil {
		return nil, err
	}
	return q.sql.QueryContext(ctx, query, args...)
}

// QueryRowContext sends the queue, then reads. After a failed send the
// transaction is aborted, and the row says so.
func (q *queuedTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	q.send() //nolint:errcheck // the read meets the aborted transaction; the run reruns (q.err)
	return q.sql.QueryRowContext(ctx, query, args...)
}

// Unwrap returns the transaction the statements run in (outbox.Emit
// checks that it is the one its context carries).
func (q *queuedTx) Unwrap() *sql.Tx { return q.sql }

// send runs the queued statements.
func (q *queuedTx) send() error {
	if q.err != nil || len(q.stmts) == 0 {
		return q.err
	}
	affected, err := q.pl.Pipeline(q.ctx, q.stmts)
	q.affected = append(q.affected, affected...)
	q.stmts = q.stmts[:0]
	if err != nil {
		q.err = err
	}
	return q.err
}

// queuedOwnTx is the batch's store transaction as seqbox's own writes in a
// handler reach it (own.Tx) in an optimistic run whose writes are queued:
// the gateway's envelope, written and never read back in the batch, joins
// the queue; everything else goes to the transaction. A queued write that
// fails reruns the batch, as a handler's own does.
type queuedOwnTx struct {
	store.ExecutorTx
	q *queuedTx
}

// GatewayEnvelopeInsert queues the envelope's statement.
func (t queuedOwnTx) GatewayEnvelopeInsert(_ context.Context, e store.GatewayEnvelope) error {
	_, err := t.q.add(t.q.pl.GatewayEnvelopeStatement(e))
	return err
}

// queuedResult is the result of a queued statement.
type queuedResult struct {
	q *queuedTx
	n int
}

// RowsAffected sends the queue if the statement is still in it.
func (r queuedResult) RowsAffected() (int64, error) {
	if r.n >= len(r.q.affected) {
		if err := r.q.send(); err != nil {
			return 0, err
		}
	}
	return r.q.affected[r.n], nil
}

// LastInsertId is not supported, as with PostgreSQL's own driver: use
// RETURNING.
func (r queuedResult) LastInsertId() (int64, error) {
	if _, err := r.RowsAffected(); err != nil {
		return 0, err
	}
	return 0, errors.New("LastInsertId is not supported by this driver")
}

// frozen returns a, or a copy of it when the handler could still change
// what the statement will send: the elements of a slice (a byte slice, an
// array parameter), or the value behind a pointer to a plain value or a
// time. Deeper references (a slice of slices, a struct's fields, what a
// driver.Valuer reads) are taken when the statement is sent.
func frozen(a any) any {
	switch v := a.(type) {
	case nil, string, int64, int, bool, float64, time.Time:
		return a
	case []byte:
		if v == nil {
			return v
		}
		return append([]byte{}, v...)
	}
	rv := reflect.ValueOf(a)
	switch {
	case rv.Kind() == reflect.Slice && !rv.IsNil():
		c := reflect.MakeSlice(rv.Type(), rv.Len(), rv.Len())
		reflect.Copy(c, rv)
		return c.Interface()
	case rv.Kind() == reflect.Pointer && !rv.IsNil() && (plain(rv.Elem().Kind()) || rv.Elem().Type() == timeType):
		c := reflect.New(rv.Elem().Type())
		c.Elem().Set(rv.Elem())
		return c.Interface()
	}
	return a
}

var timeType = reflect.TypeFor[time.Time]()

// plain reports whether a value of kind k holds no reference.
func plain(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}
