package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"time"
)

// groupCommit commits the single writes that callers make outside a
// transaction (the executor's exec on the pool: decision claims and
// records, the ledger's pending rows and results, their heartbeats) many
// in one transaction, on a store with one writer (SQLite). There each
// commit is an fsync taken in turn, so an agent path that writes a few
// rows per event around its call was bound by commits, not by work. The
// writes wait in a queue; whichever store transaction begins next takes
// them all (Store.Begin, carry): a batch's transaction, or, when none
// comes, the group's own writer goroutine. Each write runs under a
// savepoint of its own (one's failure is its own), and its caller learns
// its result once that transaction committed; should it roll back, the
// writes go back to the queue for the next one. A lone write goes at once
// as before: nothing waits for company.
type groupCommit struct {
	s  *Store
	mu sync.Mutex
	q  []*groupJob
	// closed: the store is closing; no write is queued any more.
	closed bool
	more   chan struct{}
	once   sync.Once
	stop   chan struct{}
	done   chan struct{}
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

// groupStmt is a statement of a job after its first; check, when set,
// fails the job (nothing of it is kept) unless it approves the
// statement's result.
type groupStmt struct {
	q     string
	args  []any
	check func(sql.Result) error
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
	return &groupCommit{s: s, more: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// exec runs q in the next store transaction that begins and returns once
// that committed (or failed). Once queued, the write is waited for
// whatever ctx does: it may commit.
func (g *groupCommit) exec(ctx context.Context, q string, args []any, then ...groupStmt) (sql.Result, error) {
	g.once.Do(func() { go g.run() })
	j := &groupJob{ctx: ctx, q: q, args: args, then: then, done: make(chan struct{})}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, errStoreClosed
	}
	g.q = append(g.q, j)
	g.mu.Unlock()
	select {
	case g.more <- struct{}{}:
	default:
	}
	<-j.done
	if j.err != nil {
		return nil, j.err
	}
	return j.res, nil
}

// take empties the queue, up to maxGroupWrites.
func (g *groupCommit) take() []*groupJob {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(len(g.q), maxGroupWrites)
	out := g.q[:n:n]
	g.q = g.q[n:]
	if len(g.q) == 0 {
		g.q = nil
	}
	return out
}

// requeue puts jobs back at the head of the queue, for the next
// transaction (once the store is closing, they fail).
func (g *groupCommit) requeue(jobs []*groupJob) {
	for _, j := range jobs {
		j.res, j.err = groupResult{}, nil
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		finish(jobs, errStoreClosed)
		return
	}
	g.q = append(jobs[:len(jobs):len(jobs)], g.q...)
	g.mu.Unlock()
	select {
	case g.more <- struct{}{}:
	default:
	}
}

// finish tells each job its result: the transaction that ran them ended
// with err (nil: committed).
func finish(jobs []*groupJob, err error) {
	for _, j := range jobs {
		if j.err == nil && err != nil {
			j.err = err
		}
		close(j.done)
	}
}

// close stops the writer goroutine; writes still queued fail.
func (g *groupCommit) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	close(g.stop)
	g.once.Do(func() { close(g.done) }) // never started
	<-g.done
	finish(g.take(), errStoreClosed)
}

// run is the writer of last resort: when writes wait and no transaction
// began to carry them, it begins one (Store.Begin takes them) and commits.
func (g *groupCommit) run() {
	defer close(g.done)
	for {
		select {
		case <-g.more:
		case <-g.stop:
			// Whatever is still queued fails: the store is closing.
			finish(g.take(), errStoreClosed)
			return
		}
		g.mu.Lock()
		waiting := len(g.q) > 0
		g.mu.Unlock()
		if !waiting {
			continue
		}
		// Bounded: a caller that writes on the pool while it holds the
		// writer's turn itself (a ledger call in a Handler, inside its
		// batch) would otherwise stop every grouped write for good.
		if w := g.s.dialect.Waiting; w != nil && g.s.writer.Held() {
			w()
		}
		bctx, cancel := context.WithTimeout(context.Background(), groupBeginPatience)
		tx, err := g.s.Begin(bctx)
		cancel()
		if err != nil {
			finish(g.take(), err)
			continue
		}
		if e, ok := tx.(*Executor); !ok || len(e.carried) == 0 {
			_ = tx.Rollback() // a batch's transaction took them first
			continue
		}
		_ = tx.Commit() // tells the carried writes
	}
}

// carry runs the queued writes in e, a transaction that just began or is
// about to commit (Executor.Commit), each under a savepoint (its three
// statements prepared once, as the store's own are: stmts.go); e tells
// them their results when it commits, or
// queues them again when it rolls back. It fails only when the
// transaction is left in a state no savepoint explains: the writes then
// have their error, and the transaction must be rolled back.
func (g *groupCommit) carry(e *Executor) error {
	jobs := g.take()
	if len(jobs) == 0 {
		return nil
	}
	ctx := context.Background()
	var keep []*groupJob
	for _, j := range jobs {
		if err := j.ctx.Err(); err != nil {
			j.err = err // given up on before it ran: nothing written
			close(j.done)
			continue
		}
		keep = append(keep, j)
		if _, err := e.exec(ctx, "SAVEPOINT g"); err != nil {
			finish(keep, err)
			g.requeue(pending(jobs, j))
			return err
		}
		res, err := e.exec(context.WithoutCancel(j.ctx), j.q, j.args...)
		for _, st := range j.then {
			if err != nil {
				break
			}
			var r sql.Result
			r, err = e.exec(context.WithoutCancel(j.ctx), st.q, st.args...)
			if err == nil && st.check != nil {
				err = st.check(r)
			}
		}
		if err == nil {
			j.res.affected, j.res.err = res.RowsAffected()
			_, err = e.exec(ctx, "RELEASE g")
		} else {
			j.err = err
			if _, rerr := e.exec(ctx, "ROLLBACK TO g"); rerr == nil {
				_, rerr = e.exec(ctx, "RELEASE g")
				err = rerr
			} else {
				err = rerr
			}
		}
		if err != nil {
			// The transaction is in a state no savepoint explains: none
			// of the carried writes is committed.
			finish(keep, err)
			g.requeue(pending(jobs, j))
			return err
		}
	}
	e.carried = append(e.carried, keep...)
	return nil
}

// pending is the jobs after j.
func pending(jobs []*groupJob, j *groupJob) []*groupJob {
	for i, x := range jobs {
		if x == j {
			return jobs[i+1:]
		}
	}
	return nil
}

// IsClosed reports whether err says the store was closed: its writes'
// queue (errStoreClosed) or its pool (database/sql's "sql: database is
// closed", which it does not export). Nothing on such a store will ever
// succeed again, so a loop over it ends rather than retries.
func IsClosed(err error) bool {
	return err != nil && (errors.Is(err, errStoreClosed) || strings.Contains(err.Error(), "sql: database is closed"))
}
