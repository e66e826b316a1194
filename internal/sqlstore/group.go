package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"
)

// groupCommit commits the single writes that callers make outside a
// transaction (the executor's exec on the pool: decision claims and
// records, the ledger's pending rows and results, their heartbeats) many
// in one transaction, on a store with one writer (SQLite). There each
// commit is an fsync taken in turn, so an agent path that writes a few
// rows per event around its call was bound by commits, not by work: one
// writer goroutine now takes every write waiting, runs each under a
// savepoint of its own (one's failure is its own), commits once, and
// tells each caller its result after that commit. A lone write goes at
// once, as before: nothing waits for company.
type groupCommit struct {
	s    *Store
	jobs chan *groupJob
	once sync.Once
	stop chan struct{}
	done chan struct{}
}

// groupJob is one write waiting for its group's commit: one statement,
// or several that commit together or not at all (then), under one
// savepoint; res is the first statement's.
type groupJob struct {
	ctx  context.Context
	q    string
	args []any
	then []groupStmt
	res  groupResult
	err  error
	done chan struct{}
}

// groupStmt is a statement of a job after its first.
type groupStmt struct {
	q    string
	args []any
}

// groupResult is a write's sql.Result, read before the commit.
type groupResult struct {
	affected int64
	err      error
}

// RowsAffected implements sql.Result.
func (r groupResult) RowsAffected() (int64, error) { return r.affected, r.err }

// LastInsertId implements sql.Result; seqbox's writes never ask for it.
func (r groupResult) LastInsertId() (int64, error) {
	return 0, errors.New("sqlstore: LastInsertId of a grouped write")
}

// maxGroupWrites bounds the writes of one group's transaction.
const maxGroupWrites = 256

// groupBeginPatience bounds the wait for the writer's turn, as a write on
// the pool waits for it (sqlitedb's busyPatience).
const groupBeginPatience = 2 * time.Minute

// errStoreClosed is what a write gets once its store is closed.
var errStoreClosed = errors.New("sqlstore: the store is closed")

func newGroupCommit(s *Store) *groupCommit {
	return &groupCommit{s: s, jobs: make(chan *groupJob), stop: make(chan struct{}), done: make(chan struct{})}
}

// exec runs q in the next group's transaction and returns once that
// committed (or failed). Once handed over, the write is waited for
// whatever ctx does: it may commit.
func (g *groupCommit) exec(ctx context.Context, q string, args []any, then ...groupStmt) (sql.Result, error) {
	g.once.Do(func() { go g.run() })
	j := &groupJob{ctx: ctx, q: q, args: args, then: then, done: make(chan struct{})}
	select {
	case g.jobs <- j:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-g.stop:
		return nil, errStoreClosed
	}
	<-j.done
	if j.err != nil {
		return nil, j.err
	}
	return j.res, nil
}

// close stops the writer goroutine once the writes handed over are done.
func (g *groupCommit) close() {
	close(g.stop)
	g.once.Do(func() { close(g.done) }) // never started
	<-g.done
}

// run takes the writes waiting, commits them together, and again.
func (g *groupCommit) run() {
	defer close(g.done)
	for {
		var first *groupJob
		select {
		case first = <-g.jobs:
		case <-g.stop:
			return
		}
		batch := []*groupJob{first}
	more:
		for len(batch) < maxGroupWrites {
			select {
			case j := <-g.jobs:
				batch = append(batch, j)
			default:
				break more
			}
		}
		g.commit(batch)
	}
}

// commit runs batch in one transaction, each write under a savepoint,
// and tells every job its result once the transaction ended.
func (g *groupCommit) commit(batch []*groupJob) {
	defer func() {
		for _, j := range batch {
			close(j.done)
		}
	}()
	ctx := context.Background()
	fail := func(err error) {
		for _, j := range batch {
			if j.err == nil {
				j.err = err
			}
		}
	}
	// Bounded: a caller that writes on the pool while it holds the
	// writer's turn itself (a ledger call in a Handler, inside its batch)
	// would otherwise stop every grouped write for good.
	if w := g.s.dialect.Waiting; w != nil && len(g.s.writer) == cap(g.s.writer) {
		w()
	}
	bctx, cancel := context.WithTimeout(ctx, groupBeginPatience)
	tx, err := g.s.Begin(bctx)
	cancel()
	if err != nil {
		fail(err)
		return
	}
	e := tx.(*Executor)
	ran := 0
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.err = err // given up on before it ran: nothing written
			continue
		}
		if _, err := e.tx.ExecContext(ctx, "SAVEPOINT g"); err != nil {
			j.err = err
			continue
		}
		res, err := e.exec(context.WithoutCancel(j.ctx), j.q, j.args...)
		for _, st := range j.then {
			if err != nil {
				break
			}
			_, err = e.exec(context.WithoutCancel(j.ctx), st.q, st.args...)
		}
		if err == nil {
			j.res.affected, j.res.err = res.RowsAffected()
			_, err = e.tx.ExecContext(ctx, "RELEASE g")
			ran++
		} else {
			j.err = err
			if _, rerr := e.tx.ExecContext(ctx, "ROLLBACK TO g"); rerr == nil {
				_, rerr = e.tx.ExecContext(ctx, "RELEASE g")
				err = rerr
			} else {
				err = rerr
			}
		}
		if err != nil {
			// The transaction is in a state no savepoint explains: none
			// of the batch is committed.
			_ = tx.Rollback()
			fail(err)
			return
		}
	}
	if ran == 0 {
		_ = tx.Rollback()
		return
	}
	if err := tx.Commit(); err != nil {
		fail(err)
	}
}
