package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/seqbox/seqbox/store"
)

// stmtCache holds the store's own statements prepared once on the pool
// (the handler gets the *sql.Tx itself, unwrapped):
// database/sql then keeps each prepared on every connection it has run
// on, and a transaction reuses the one on its connection, so the SQL is
// parsed once per connection instead of once per call. pgx caches
// statements itself; SQLite's driver does not, and parsing was a third of
// the pipeline's CPU.
type stmtCache struct {
	db *sql.DB
	m  sync.Map // query → *sql.Stmt
	// n counts the statements prepared; past stmtLimit, new statements
	// run unprepared, so text that varies per call (savepoint names)
	// cannot grow the cache without bound.
	n atomic.Int32
}

// stmtLimit bounds the statements a store keeps prepared.
const stmtLimit = 512

// get returns the prepared statement for q, or nil when it cannot be
// prepared (the caller then runs q unprepared and meets the error there).
func (c *stmtCache) get(ctx context.Context, q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	if v, ok := c.m.Load(q); ok {
		return v.(*sql.Stmt)
	}
	if c.n.Load() >= stmtLimit {
		return nil
	}
	st, err := c.db.PrepareContext(context.WithoutCancel(ctx), q)
	if err != nil {
		return nil
	}
	if v, loaded := c.m.LoadOrStore(q, st); loaded {
		st.Close()
		return v.(*sql.Stmt)
	}
	c.n.Add(1)
	return st
}

// close releases every prepared statement.
func (c *stmtCache) close() {
	if c == nil {
		return
	}
	c.m.Range(func(_, v any) bool {
		v.(*sql.Stmt).Close()
		return true
	})
}

// stmt returns q prepared for the executor's transaction or pool, or nil
// when the store does not cache statements.
func (t *Executor) stmt(ctx context.Context, q string) *sql.Stmt {
	st := t.stmts.get(ctx, q)
	if st != nil && t.tx != nil {
		st = t.tx.StmtContext(ctx, st)
	}
	return st
}

// exec runs q, prepared when the store caches.
func (t *Executor) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if t.group != nil {
		return t.group.exec(ctx, q, args)
	}
	q, args = t.spell(q, args)
	if st := t.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.db.ExecContext(ctx, q, args...)
}

// run runs stmts in order, each Read reading its statement's rows:
// together, in one round trip, in a transaction that pipelines, else one
// at a time (one statement alone runs as any other, prepared).
func (t *Executor) run(ctx context.Context, stmts ...store.Statement) error {
	if len(stmts) == 0 {
		return nil
	}
	if t.pipeline != nil && len(stmts) > 1 {
		_, err := t.pipelined(ctx, stmts)
		return err
	}
	for _, st := range stmts {
		if _, err := t.alone(ctx, st); err != nil {
			return err
		}
	}
	return nil
}

// single runs one statement of the agent path and returns the rows it
// affected (with a Read: returned). On the pool of a store that pipelines
// it goes with other callers' (pipeGroup); elsewhere alone, as exec and
// query run it. A Read may run twice (pipeGroup.do).
func (t *Executor) single(ctx context.Context, st store.Statement) (int64, error) {
	if t.pipes != nil && t.tx == nil {
		return t.pipes.do(ctx, st)
	}
	return t.alone(ctx, st)
}

// alone runs st by itself: exec for a write, query and its Read for rows.
func (t *Executor) alone(ctx context.Context, st store.Statement) (int64, error) {
	if st.Read == nil {
		res, err := t.exec(ctx, st.Query, st.Args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	rows, err := t.query(ctx, st.Query, st.Args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := &countedRows{Rows: rows}
	if err := st.Read(n); err != nil {
		return 0, err
	}
	return n.n, rows.Err()
}

// countedRows counts the rows a Read took.
type countedRows struct {
	*sql.Rows
	n int64
}

// Next implements store.Rows.
func (r *countedRows) Next() bool {
	if r.Rows.Next() {
		r.n++
		return true
	}
	return false
}

// oneRow is a Read that scans the first row into dest, as QueryRow's Scan
// does: sql.ErrNoRows when there is none.
func oneRow(dest ...any) func(store.Rows) error {
	return func(rows store.Rows) error {
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return err
			}
			return sql.ErrNoRows
		}
		return rows.Scan(dest...)
	}
}

// pipelined sends stmts together (t.pipeline) and says in words what a
// storage failure means.
func (t *Executor) pipelined(ctx context.Context, stmts []store.Statement) ([]int64, error) {
	affected, err := t.pipeline(ctx, stmts)
	if err != nil {
		return affected, t.storageError(fmt.Sprintf("pipeline of %d statements", len(stmts)), err)
	}
	return affected, nil
}

// query runs q, prepared when the store caches.
func (t *Executor) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	q, args = t.spell(q, args)
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.db.QueryContext(ctx, q, args...)
}

// queryRow runs q, prepared when the store caches.
func (t *Executor) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	q, args = t.spell(q, args)
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.db.QueryRowContext(ctx, q, args...)
}

// spell returns q and args as the executor's database binds them fastest:
// on SQLite with ? placeholders (dialect.Positional).
func (t *Executor) spell(q string, args []any) (string, []any) {
	if !t.positional {
		return q, args
	}
	return dialect.Positional(q, args)
}
