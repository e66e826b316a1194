package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	"github.com/seqbox/seqbox/store"
)

// pipeGroup sends the single statements that callers make on the pool of
// a store that pipelines (PostgreSQL) many together: one round trip and
// one commit for all of them, where each was a round trip and a commit of
// its own. On the agent path these are each event's look before its call,
// the ledger's pending row, and the record of the call's result with its
// decision (docs/design.md §15.1): with tens of agent calls in flight they
// are most of the statements and commits an event makes, and the server's
// CPU is what the path is bound by.
//
// The statements of one send run in one implicit transaction (the
// extended protocol's, up to its Sync): all commit, or none does. When the
// server refuses one (Dialect.Refused: an error it answered, so nothing
// was committed), each caller runs its statement again alone, as it would
// have without the group, for its own answer; a statement's Read that
// fails is its caller's error only; any other failure (the
// connection lost, so the commit is unknown) is every statement's error,
// as it would have been a lone statement's. So a caller sees what it would
// have seen alone, only later by the wait for its send.
//
// Leaders send, at most maxPipeSends at once: a caller whose statement
// finds fewer sends under way sends the queue itself, and keeps sending
// until its own statement is answered; whatever is queued then goes on in
// a goroutine that holds the same turn until the queue is empty. A lone
// statement goes at once, as before: nothing waits for company.
type pipeGroup struct {
	db *sql.DB
	// send runs stmts in one round trip on conn (Dialect.Pipeline).
	send func(ctx context.Context, conn *sql.Conn, stmts []store.Statement) ([]int64, error)
	// refused says the server refused a statement (Dialect.Refused).
	refused func(error) bool
	// first goes first in each send (Dialect.GroupFirst), or nothing.
	first []store.Statement
	// alone runs one statement as it would run without the group.
	alone func(ctx context.Context, st store.Statement) (int64, error)
	// max bounds the sends under way (maxPipeSends).
	max int
	mu  sync.Mutex
	// hold, when set (tests), is waited for by each send before it goes;
	// held counts the statements waiting for it.
	hold chan struct{}
	held int
	// sent counts the sends (tests).
	sent    int
	q       []*pipeJob
	running int
	closed  bool
	wg      sync.WaitGroup
}

// pipeJob is one statement waiting for its send.
type pipeJob struct {
	ctx      context.Context
	st       store.Statement
	affected int64
	err      error
	// readErr is what the statement's Read returned in its send.
	readErr error
	// alone, once done: the statement's send was refused, and its caller
	// runs it alone.
	alone bool
	done  chan struct{}
}

// maxPipeSends bounds a pipeGroup's sends under way: each is a connection
// and a server process, and the statements of one send run one after the
// other, so a few at once keep the server's cores busy while the queue
// fills for the next.
const maxPipeSends = 4

// maxPipeStatements bounds the statements of one send.
const maxPipeStatements = 64

func newPipeGroup(db *sql.DB, d Dialect, alone func(ctx context.Context, st store.Statement) (int64, error)) *pipeGroup {
	g := &pipeGroup{db: db, send: d.Pipeline, refused: d.Refused, alone: alone, max: maxPipeSends}
	if d.GroupFirst != "" {
		g.first = []store.Statement{{Query: d.GroupFirst}}
	}
	return g
}

// do runs st with the statements other callers queue meanwhile and
// returns its rows affected (or, with a Read, returned) once its send
// committed. st.Read may run twice (the second time when a send is
// refused and the statement runs alone): it must set, not add to, what it
// reads into. A caller that gives up while its send waits for a pool
// connection is told its context's error once all of the send's callers
// have (nothing is sent); once sent, the statement is waited for whatever
// ctx does: it may commit.
func (g *pipeGroup) do(ctx context.Context, st store.Statement) (int64, error) {
	j := &pipeJob{ctx: ctx, st: st, done: make(chan struct{})}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return 0, errStoreClosed
	}
	g.q = append(g.q, j)
	lead := g.running < g.max
	if lead {
		g.running++
		g.wg.Add(1)
	}
	g.mu.Unlock()
	if lead {
		g.lead(j)
	}
	<-j.done
	if j.alone {
		return g.alone(ctx, st)
	}
	return j.affected, j.err
}

// lead sends the queue until own is answered (own nil: until the queue is
// empty), then leaves what is queued to a goroutine of its own and gives
// the turn back once the queue is empty.
func (g *pipeGroup) lead(own *pipeJob) {
	for {
		g.mu.Lock()
		if len(g.q) == 0 {
			g.running--
			g.mu.Unlock()
			g.wg.Done()
			return
		}
		if own != nil && answered(own) {
			g.mu.Unlock()
			go g.lead(nil)
			return
		}
		n := min(len(g.q), maxPipeStatements)
		jobs := g.q[:n:n]
		g.q = g.q[n:]
		g.mu.Unlock()
		g.flush(jobs)
	}
}

// answered reports whether j's send is over.
func answered(j *pipeJob) bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// flush sends jobs and tells each its answer.
func (g *pipeGroup) flush(jobs []*pipeJob) {
	g.mu.Lock()
	hold := g.hold
	if hold != nil {
		g.held += len(jobs)
	}
	g.mu.Unlock()
	if hold != nil {
		<-hold
	}
	live := jobs[:0:0]
	for _, j := range jobs {
		if err := j.ctx.Err(); err != nil {
			j.err = err // given up on before it was sent: nothing written
			close(j.done)
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	// A send of one too: the leader is busy for its round trip, so that
	// the statements made meanwhile queue for the next send, and the
	// statement's wait for a lock is bounded as any send's is.
	err := g.together(context.WithoutCancel(live[0].ctx), live)
	// Refused: nothing of the send was committed.
	alone := err != nil && g.refused != nil && g.refused(err)
	unsent := errors.Is(err, errGivenUp)
	for _, j := range live {
		switch {
		case unsent:
			j.affected, j.err = 0, j.ctx.Err() // nothing was sent
		case alone:
			// Each caller runs its statement by itself, at once and all
			// at the same time, as without the group, for its own answer.
			j.alone = true
		case err != nil:
			j.affected, j.err = 0, err
		}
		close(j.done)
	}
}

// errGivenUp is together's error when every caller gave up before a
// connection was had: nothing was sent.
var errGivenUp = errors.New("sqlstore: every statement of the send was given up on")

// together sends live's statements in one round trip on a connection of
// the pool, and sets each job's rows affected. The wait for the
// connection ends when every caller has given up (as a lone statement's
// wait ends with its context: errGivenUp); once sent, the statements are
// waited for.
func (g *pipeGroup) together(ctx context.Context, live []*pipeJob) error {
	conn, err := g.conn(ctx, live)
	if err != nil {
		return err
	}
	defer conn.Close()
	stmts := append(make([]store.Statement, 0, len(g.first)+len(live)), g.first...)
	for _, j := range live {
		st := j.st
		if read := st.Read; read != nil {
			// A Read's failure is its caller's alone: the send goes on,
			// and commits with the others.
			st.Read = func(rows store.Rows) error {
				j.readErr = read(rows)
				return nil
			}
		}
		stmts = append(stmts, st)
	}
	g.mu.Lock()
	g.sent++
	g.mu.Unlock()
	affected, err := g.send(ctx, conn, stmts)
	if err != nil {
		return err
	}
	for i, j := range live {
		j.affected, j.err = affected[len(g.first)+i], j.readErr
	}
	return nil
}

// conn takes a connection of the pool for live's send, giving up once
// every one of live's callers has.
func (g *pipeGroup) conn(ctx context.Context, live []*pipeJob) (*sql.Conn, error) {
	wait, giveUp := context.WithCancel(ctx)
	defer giveUp()
	had := make(chan struct{})
	defer close(had)
	go func() {
		for _, j := range live {
			select {
			case <-j.ctx.Done():
			case <-had:
				return
			}
		}
		giveUp()
	}()
	conn, err := g.db.Conn(wait)
	if err != nil && wait.Err() != nil && ctx.Err() == nil {
		return nil, errGivenUp
	}
	return conn, err
}

// close refuses new statements and waits for the sends under way.
func (g *pipeGroup) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
