package sqlitedb

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"modernc.org/sqlite"

	"github.com/seqbox/seqbox/internal/writeturn"
)

// A writer pool's connections (openWriter) make the file's busy or locked
// state seqbox's own business, never a step's failure:
//
//   - a write outside a transaction (the effects ledger's rows, the
//     decider's claims and decisions, the embedded queue's leases and
//     settlements: everything an Executor of the store runs on its pool)
//     runs in the file's writer turn (Turn), as batch transactions do, so
//     that in one process it waits in line for the write lock instead of
//     polling for it in SQLite's busy handler, which a stream of batches,
//     each taking the lock the moment the last one commits, starves past
//     busy_timeout;
//   - such a statement, and BEGIN, that still fail with SQLITE_BUSY or
//     SQLITE_LOCKED (another process held the lock past busy_timeout) are
//     run again, for up to busyPatience or until the context ends. Both
//     are safe to repeat: a statement outside a transaction that failed
//     so did nothing, and neither did a BEGIN that failed.
//
// A statement inside a transaction is not run again: with BEGIN IMMEDIATE
// the transaction holds the write lock from its start, so its statements
// do not meet a busy database.

// turnKey marks a context whose caller holds a writer turn (Hold), or asks
// for none (WithoutTurn).
type turnKey struct{}

// noTurn is the turnKey value of WithoutTurn.
var noTurn = new(writeturn.Turn)

// Hold waits for turn (first if ctx is writeturn.Urgent) and returns ctx
// marked as holding it: writes outside a transaction run with that
// context on the file's pools do not wait for the turn again.
func Hold(ctx context.Context, turn *writeturn.Turn) (context.Context, func(), error) {
	release, err := turn.Take(ctx)
	if err != nil {
		return ctx, nil, err
	}
	return context.WithValue(ctx, turnKey{}, turn), release, nil
}

// WithoutTurn returns ctx marked so that writes outside a transaction run
// with it do not wait for the writer turn (they poll in SQLite's busy
// handler, and are still run again when busy): for a write that must not
// wait behind a long batch, as extending a lease.
func WithoutTurn(ctx context.Context) context.Context {
	return context.WithValue(ctx, turnKey{}, noTurn)
}

// IsLocked reports whether err is SQLITE_LOCKED (under any extended
// code): a lock within this connection's own database, or another
// connection's of a shared cache, was in the way.
func IsLocked(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == 6 // SQLITE_LOCKED
}

// ContendedError is the error of a step whose database stayed busy or
// locked past busyPatience: seqbox's own contention (another process held
// the write lock all along), which says nothing about the message the step
// worked on. Its Wait asks for the message to wait and come back, as the
// pipeline does for an error with a Wait method, instead of spending one
// of its attempts.
type ContendedError struct {
	// Err is the last error: SQLITE_BUSY or SQLITE_LOCKED, or the wait
	// for the writer turn running out.
	Err error
}

func (e *ContendedError) Error() string {
	return fmt.Sprintf("sqlite: the database stayed busy for %s (seqbox's own contention, not the message's failure): %v", busyPatience, e.Err)
}

// Unwrap returns the driver's error.
func (e *ContendedError) Unwrap() error { return e.Err }

// Wait is how long the message waits before it is tried again.
func (e *ContendedError) Wait() time.Duration { return contendedWait }

// contendedWait is ContendedError's Wait.
const contendedWait = time.Second

// Contended reports whether err is SQLITE_BUSY or SQLITE_LOCKED: the
// database was in use, which says nothing about the work itself.
func Contended(err error) bool { return IsBusy(err) || IsLocked(err) }

// patientConnector opens a writer pool's connections (patientConn).
type patientConnector struct {
	base driver.Connector
	// turn is the file's writer turn; nil for an in-memory database.
	turn *writeturn.Turn
}

func (c *patientConnector) Connect(ctx context.Context) (driver.Conn, error) {
	var conn driver.Conn
	err := patiently(ctx, func() (err error) {
		conn, err = c.base.Connect(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &patientConn{conn: conn, turn: c.turn}, nil
}

func (c *patientConnector) Driver() driver.Driver { return c.base.Driver() }

// patientConn is one connection of a writer pool.
type patientConn struct {
	conn driver.Conn
	turn *writeturn.Turn
	// inTx is set while a transaction is open: one BeginTx opened
	// (driverTx set too) or one a BEGIN statement began.
	inTx     bool
	driverTx bool
}

var (
	_ driver.Conn               = (*patientConn)(nil)
	_ driver.ConnBeginTx        = (*patientConn)(nil)
	_ driver.ConnPrepareContext = (*patientConn)(nil)
	_ driver.ExecerContext      = (*patientConn)(nil)
	_ driver.QueryerContext     = (*patientConn)(nil)
	_ driver.Pinger             = (*patientConn)(nil)
	_ driver.SessionResetter    = (*patientConn)(nil)
	_ driver.Validator          = (*patientConn)(nil)
)

// Unwrap returns the driver's own connection.
func (c *patientConn) Unwrap() driver.Conn { return c.conn }

func (c *patientConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *patientConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	countPrepare(query)
	var st driver.Stmt
	err := patiently(ctx, func() (err error) {
		st, err = c.conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &patientStmt{stmt: st, c: c, kind: kindOf(query), query: query}, nil
}

func (c *patientConn) Close() error { return c.conn.Close() }

func (c *patientConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *patientConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	defer timeStatement("BEGIN", false)()
	var tx driver.Tx
	err := patiently(ctx, func() (err error) {
		tx, err = c.conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.inTx, c.driverTx = true, true
	return &patientTx{tx: tx, c: c}, nil
}

func (c *patientConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	defer timeStatement(query, true)()
	var res driver.Result
	_, err := c.run(ctx, query, kindOf(query), func() (_ driver.Rows, err error) {
		res, err = c.conn.(driver.ExecerContext).ExecContext(ctx, query, args)
		return nil, err
	})
	return res, err
}

func (c *patientConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	defer timeStatement(query, true)()
	return c.run(ctx, query, kindOf(query), func() (driver.Rows, error) {
		return c.conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	})
}

// run runs one statement of kind k through do, which returns its rows
// (nil for an Exec). Outside a transaction a write runs in the writer
// turn, kept until its rows are closed, and any statement that meets the
// database busy or locked runs again.
func (c *patientConn) run(ctx context.Context, query string, k kind, do func() (driver.Rows, error)) (driver.Rows, error) {
	if c.driverTx && (k == kindBegin || k == kindEnd) {
		// The transaction is database/sql's (a Handler's tx is one):
		// ended by a statement, it would commit or drop what its owner
		// still counts on, and the owner's next statement would run
		// outside it.
		return nil, &TxStatementError{Statement: statementHead(query)}
	}
	if c.inTx {
		rows, err := do()
		if err == nil && k == kindEnd {
			c.inTx = false
		}
		return rows, err
	}
	deadline := time.Now().Add(busyPatience)
	for {
		var release func()
		if k == kindWrite {
			r, err := c.takeTurn(ctx, deadline)
			if err != nil {
				return nil, err
			}
			release = r
		}
		rows, err := do()
		if err == nil {
			if k == kindBegin {
				c.inTx = true
			}
			if rows != nil && release != nil {
				// SQLite ends the statement's transaction, and frees the
				// write lock, only when its rows are closed.
				return &heldRows{Rows: rows, release: release}, nil
			}
			if release != nil {
				release()
			}
			return rows, nil
		}
		if release != nil {
			release()
		}
		if err := again(ctx, err, deadline); err != nil {
			return nil, err
		}
	}
}

// takeTurn waits for the file's writer turn, unless ctx holds it or asks
// for none; the returned release is nil when nothing was taken.
func (c *patientConn) takeTurn(ctx context.Context, deadline time.Time) (func(), error) {
	if c.turn == nil {
		return nil, nil
	}
	if h, _ := ctx.Value(turnKey{}).(*writeturn.Turn); h == c.turn || h == noTurn {
		return nil, nil
	}
	if release, ok := c.turn.TryTake(); ok {
		return release, nil
	}
	contended()
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	release, err := c.turn.Take(wctx)
	if err != nil && ctx.Err() == nil {
		return nil, &ContendedError{Err: fmt.Errorf("sqlite: waited %s for this process's writer turn", busyPatience)}
	}
	return release, err
}

// contended tells a test that a step met its database in use and goes on.
func contended() {
	if onContention != nil {
		onContention()
	}
}

// again returns nil when err is SQLITE_BUSY or SQLITE_LOCKED and the work
// may run again (after a short pause), else the error to return.
func again(ctx context.Context, err error, deadline time.Time) error {
	if !Contended(err) {
		return err
	}
	if time.Now().After(deadline) {
		return &ContendedError{Err: err}
	}
	busyRetries.Add(1)
	contended()
	t := time.NewTimer(busyPause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return errors.Join(err, ctx.Err())
	case <-t.C:
		return nil
	}
}

// busyPause is the pause before a statement that met the database busy
// runs again: SQLite's busy handler has already waited busy_timeout.
const busyPause = 10 * time.Millisecond

// patiently runs fn again while it fails with SQLITE_BUSY or SQLITE_LOCKED,
// for up to busyPatience or until ctx ends: for work that is safe to
// repeat (connecting, preparing, BEGIN).
func patiently(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(busyPatience)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if err := again(ctx, err, deadline); err != nil {
			return err
		}
	}
}

func (c *patientConn) Ping(ctx context.Context) error {
	if p, ok := c.conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *patientConn) ResetSession(ctx context.Context) error {
	if r, ok := c.conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *patientConn) IsValid() bool {
	if v, ok := c.conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// heldRows are the rows of a write outside a transaction: the writer turn
// is given back when they are closed.
type heldRows struct {
	driver.Rows
	release func()
}

func (r *heldRows) Close() error {
	err := r.Rows.Close()
	r.release()
	return err
}

// TxStatementError refuses a statement that would begin or end a
// transaction inside one database/sql opened (a Handler's tx): COMMIT,
// END, ROLLBACK (not ROLLBACK TO) or BEGIN. It is refused before it runs;
// the transaction goes on as it was.
type TxStatementError struct {
	// Statement is the refused statement's start.
	Statement string
}

// Error says what was refused and how the transaction ends instead.
func (e *TxStatementError) Error() string {
	return fmt.Sprintf("sqlite: %s inside the transaction seqbox opened: a Handler ends its work by returning "+
		"(seqbox commits, or rolls back on its error); a transaction of database/sql ends with its Commit or Rollback", e.Statement)
}

// statementHead is the start of query, for an error: at most 40 bytes
// of it, on one line.
func statementHead(query string) string {
	q := strings.Join(strings.Fields(query), " ")
	if len(q) > 40 {
		q = strings.ToValidUTF8(q[:40], "") + "…"
	}
	return q
}

// patientStmt is a prepared statement of a writer pool: run as its
// connection runs statements.
type patientStmt struct {
	stmt  driver.Stmt
	query string // its text, for RecordStatements
	c     *patientConn
	kind  kind
}

func (s *patientStmt) Close() error  { return s.stmt.Close() }
func (s *patientStmt) NumInput() int { return s.stmt.NumInput() }

func (s *patientStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *patientStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func (s *patientStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	defer timeStatement(s.query, false)()
	var res driver.Result
	_, err := s.c.run(ctx, s.query, s.kind, func() (_ driver.Rows, err error) {
		res, err = s.stmt.(driver.StmtExecContext).ExecContext(ctx, args)
		return nil, err
	})
	return res, err
}

func (s *patientStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	defer timeStatement(s.query, false)()
	return s.c.run(ctx, s.query, s.kind, func() (driver.Rows, error) {
		return s.stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	})
}

// named converts positional values to the named form.
func named(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, v := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}

// patientTx is a transaction BeginTx opened: its end ends the
// connection's transaction.
type patientTx struct {
	tx driver.Tx
	c  *patientConn
}

func (t *patientTx) Commit() error {
	defer timeStatement("COMMIT", false)()
	t.c.inTx, t.c.driverTx = false, false
	return t.tx.Commit()
}

func (t *patientTx) Rollback() error {
	t.c.inTx, t.c.driverTx = false, false
	return t.tx.Rollback()
}

// statement kinds, by the first keyword.
type kind int

const (
	kindWrite kind = iota // may write: takes the writer turn outside a transaction
	kindRead              // SELECT, EXPLAIN, VALUES, PRAGMA: no turn
	kindBegin             // BEGIN: a transaction from here
	kindEnd               // COMMIT, END, ROLLBACK (not ROLLBACK TO): none from here
)

// kindOf classifies a statement by its first keyword; anything it does
// not know may write.
func kindOf(query string) kind {
	q := strings.TrimLeft(query, " \t\r\n(")
	for strings.HasPrefix(q, "--") || strings.HasPrefix(q, "/*") {
		if strings.HasPrefix(q, "--") {
			i := strings.IndexByte(q, '\n')
			if i < 0 {
				return kindWrite
			}
			q = strings.TrimLeft(q[i+1:], " \t\r\n(")
			continue
		}
		i := strings.Index(q, "*/")
		if i < 0 {
			return kindWrite
		}
		q = strings.TrimLeft(q[i+2:], " \t\r\n(")
	}
	word := q
	if i := strings.IndexAny(q, " \t\r\n(;"); i >= 0 {
		word = q[:i]
	}
	switch strings.ToUpper(word) {
	case "SELECT", "EXPLAIN", "VALUES", "PRAGMA":
		return kindRead
	case "BEGIN":
		return kindBegin
	case "COMMIT", "END":
		return kindEnd
	case "ROLLBACK":
		if rest := strings.ToUpper(strings.TrimSpace(q[len(word):])); strings.HasPrefix(rest, "TO") ||
			strings.HasPrefix(rest, "TRANSACTION TO") {
			return kindWrite
		}
		return kindEnd
	}
	return kindWrite
}
