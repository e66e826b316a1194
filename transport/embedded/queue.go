// Package embedded is seqbox's default transport: a durable at-least-once
// queue in a SQLite file (or a PostgreSQL database, for deployments that
// have only PostgreSQL and want no broker), with the semantics of SQS. A received message is
// leased for a visibility timeout; it comes back when the lease expires or
// on a nack with delay; every delivery counts an attempt; only Ack removes
// it.
package embedded

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/internal/ddl"
	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/seqbox/seqbox/internal/writeturn"
	"github.com/seqbox/seqbox/transport"
)

// Config configures a Queue. Zero values take the defaults; a negative
// duration is refused by Open.
type Config struct {
	// Name separates queues that share a file. Default "default".
	Name string
	// Lease is the visibility timeout of a received message. Default 30s.
	Lease time.Duration
	// PollInterval is how often an idle Receive looks again. Default 25ms.
	PollInterval time.Duration
	// Wait is how long Receive waits for a message before returning an
	// empty batch. Default 250ms.
	Wait time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// validate refuses a negative duration: a mistake, not a request for the
// default (zero is).
func (c *Config) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Lease", c.Lease}, {"PollInterval", c.PollInterval}, {"Wait", c.Wait}} {
		if d.v < 0 {
			return fmt.Errorf("embedded queue: %s: %s is negative (zero takes the default)", d.name, d.v)
		}
	}
	return nil
}

func (c *Config) defaults() {
	if c.Name == "" {
		c.Name = "default"
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 25 * time.Millisecond
	}
	if c.Wait <= 0 {
		c.Wait = 250 * time.Millisecond
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Queue is a durable queue in a SQLite file.
type Queue struct {
	db     *sql.DB
	cfg    Config
	lock   string
	mu     sync.Mutex
	closed bool
	// wake is this queue's wake-up in this process (wakerFor), shared by
	// every Queue opened on the same database and name.
	wake *waker
	// waiting counts the Receives waiting for a poll or a wake-up (tests).
	waiting atomic.Int32
	// location names the database the queue lives in (SQLite: the file's
	// absolute path; PostgreSQL: host, database and schema).
	location string
	// receive is the lease statement, prepared once: SQLite's driver
	// would parse it again on every poll; probe is the idle look's,
	// prepared once as well (a bench's 5 ms poll compiled it 200 times a
	// second).
	prepareOnce, probeOnce sync.Once
	receive, probe         *sql.Stmt
	// leases, on SQLite, is the pool the receive statement runs on: its
	// commits do not wait for the disk (sqlitedb.OpenRelaxed). A lease
	// that a machine crash loses only makes its messages visible again
	// (the inbox absorbs the redelivery), and the next publish, batch or
	// ack commit syncs it with them; it spares an fsync per receive.
	// Nil on PostgreSQL: receives run on db.
	leases *sql.DB
	// leaseSQL and probeSQL are the receive statement and the idle look
	// in the queue's dialect, built once (leaseStatement, probeStatement).
	leaseSQL, probeSQL string
	// turn, on SQLite, is the writer turn of the queue's file, shared
	// with a store on the same file (sqlitedb.Turn): receiving, publishing
	// and settling wait for it instead of polling in SQLite's busy
	// handler, a publish before the consumers' writes (writeturn.Urgent).
	// Extend does not: it must not wait behind a long batch.
	turn *writeturn.Turn
}

// writing runs fn in the file's writer turn (SQLite), or at once. fn's
// context says it holds the turn, so that the file's pools run its writes
// without waiting for the turn again (sqlitedb.Hold).
func (q *Queue) writing(ctx context.Context, fn func(ctx context.Context) error) error {
	if q.turn == nil {
		return fn(ctx)
	}
	ctx, release, err := sqlitedb.Hold(ctx, q.turn)
	if err != nil {
		return err
	}
	defer release()
	return fn(ctx)
}

var (
	_ transport.Transport     = (*Queue)(nil)
	_ transport.Publisher     = (*Queue)(nil)
	_ transport.BatchAcker    = (*Queue)(nil)
	_ transport.BatchExtender = (*Queue)(nil)
	_ transport.TxAcker       = (*Queue)(nil)
	_ transport.NextTaker     = (*Queue)(nil)
)

// Open opens the queue in the SQLite file at path, or in the PostgreSQL
// database a postgres:// URL names (it may be the store's own database).
// On PostgreSQL, competing receivers lease with FOR UPDATE SKIP LOCKED.
func Open(ctx context.Context, path string, cfg Config) (*Queue, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	if pgdb.IsURL(path) {
		t, err := pgdb.Locate(path, "")
		if err != nil {
			return nil, err
		}
		// The receive statement must walk the (queue, seq) index
		// (seqbox_queue_order, see ensureHOT) in seq order and stop after a batch. Right after a burst
		// of publishes the table's statistics still describe it empty, and
		// the planner then reads every ready row (a bitmap scan) and sorts
		// them for each receive: 20 ms at a 31,000 backlog, and growing
		// with it, against 0.4 ms for the index walk. This pool runs only
		// the queue's own statements (primary-key lookups and that walk),
		// none of which needs a bitmap scan.
		//
		// Nor a sequential scan. The receive and the lease extension update
		// the rows they locked by tuple id (see leaseStatement). A queue
		// table autovacuum has not yet visited has no statistics, so the
		// planner may take it for a few pages and, instead of fetching the
		// batch's tuples by id (a Tid Scan), read the whole table, with
		// the visibility check of every deleted row still on its pages, at
		// every receive (TestPostgresLeasePlanOnAFreshQueue;
		// docs/benchmarks-history.md §14).
		db, err := pgdb.OpenWith(ctx, path, map[string]string{"enable_bitmapscan": "off", "enable_seqscan": "off"})
		if err != nil {
			return nil, err
		}
		q, err := create(ctx, db, cfg, dialect.Postgres, dialect.XactLock(dialect.QueueMigrationLock),
			t.Schema, pgdb.Redact(path))
		if err == nil {
			q.location = t.Location()
			q.wake = wakerFor(q.location, cfg.Name)
		}
		return q, err
	}
	db, err := sqlitedb.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	q, err := create(ctx, db, cfg, dialect.SQLite, "", "", path)
	if err != nil {
		return nil, err
	}
	q.location = sqlitedb.FileOf(path)
	q.wake = wakerFor(q.location, cfg.Name)
	q.turn = sqlitedb.Turn(path)
	if q.leases, err = sqlitedb.OpenRelaxed(ctx, path); err != nil {
		db.Close()
		return nil, err
	}
	q.leases.SetMaxOpenConns(1) // receives take the writer turn: one at a time
	return q, nil
}

// Location names the database the queue lives in: a store with the same
// location acknowledges in its own transaction.
func (q *Queue) Location() string { return q.location }

// AckIn acknowledges ds through exec, a transaction on the queue's
// database, as AckBatch does outside one.
func (q *Queue) AckIn(ctx context.Context, exec transport.Execer, ds []transport.Delivery) error {
	_, err := q.ackWith(ctx, exec, true, ds)
	if err == nil && readies(ds) {
		// A group's next message is ready once this commits: a Receive
		// of this process woken now looks again in the writer's turn,
		// which on SQLite is after that commit; on PostgreSQL it may look
		// too early and falls back to its poll.
		q.wakeReceivers()
	}
	return err
}

// AckCommitted implements transport.TxAckCommitter: the acknowledgements
// AckIn made of ds have committed, so a group's next message is ready
// now.
func (q *Queue) AckCommitted(ds []transport.Delivery) {
	if readies(ds) {
		q.wakeReceivers()
	}
}

// readies reports whether acknowledging ds may make a message ready: a
// group's head whose next message its holder did not take (TakeNext), or
// took and settled since (acknowledged: the one after it may be ready;
// nacked: it is). An ungrouped message has nothing behind it: waking the
// idle Receives for its ack sent each to lease nothing, in SQLite's one
// writer's turn, after every batch of a consumer with Decide
// (TestAckWakesOnlyWhenItReadiesAMessage).
func readies(ds []transport.Delivery) bool {
	return slices.ContainsFunc(ds, func(td transport.Delivery) bool {
		d, ok := td.(*delivery)
		if !ok {
			return true
		}
		next := d.next.Load()
		return d.group != "" && (next == nil || next.settled.Load())
	})
}

// create makes the queue's table if needed, running every file of
// migrations/ in order; on PostgreSQL it lands in seqbox's schema
// (pgSchema), next to the store's tables.
func create(ctx context.Context, db *sql.DB, cfg Config, d dialect.SQL, migrationLock, pgSchema, where string) (*Queue, error) {
	err := sqlitedb.RetryBusy(ctx, func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // no-op after commit
		if migrationLock != "" {
			if _, err := tx.ExecContext(ctx, migrationLock); err != nil {
				return err
			}
		}
		if pgSchema != "" {
			if err := pgdb.EnterSchema(ctx, tx, pgSchema); err != nil {
				return err
			}
		}
		for _, m := range migrations {
			if err := ddl.Exec(ctx, tx, d, m.SQL); err != nil {
				return err
			}
		}
		if err := ensureGroups(ctx, tx, d); err != nil {
			return err
		}
		if err := ensureHeads(ctx, tx, d); err != nil {
			return err
		}
		if d == dialect.Postgres {
			if err := ensureHOT(ctx, tx); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("embedded queue: create schema in %s: %w", where, err)
	}
	q := &Queue{db: db, cfg: cfg, lock: d.LockRowSkip}
	q.leaseSQL, q.probeSQL = q.leaseStatement(), q.probeStatement()
	return q, nil
}

// Publish appends a message, ready at once.
func (q *Queue) Publish(ctx context.Context, body []byte) error {
	if body == nil {
		return errNilBody
	}
	now := q.cfg.Now().UnixMicro()
	err := q.writing(writeturn.Urgent(ctx), func(ctx context.Context) error {
		_, err := q.db.ExecContext(ctx, `INSERT INTO seqbox_queue (queue, body, visible_at, enqueued_at) VALUES ($1, $2, $3, $3)`,
			q.cfg.Name, body, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("embedded queue: publish: %w", err)
	}
	q.wakeReceivers()
	return nil
}

// PublishBatch appends messages in order, in one transaction: all or none.
func (q *Queue) PublishBatch(ctx context.Context, bodies [][]byte) error {
	return q.publishing(ctx, bodies, nil)
}

// errNilBody refuses a message with no body at all (nil; an empty body,
// []byte{}, is a message, which the consumer rejects as it would any).
var errNilBody = errors.New("embedded queue: publish: the body is nil; nothing was published")

// PublishGrouped is PublishBatch with a message group per body ("" for
// none): a group's messages are received one at a time, in publication
// order, each once the one before it is acknowledged, by whichever
// receiver (SQS FIFO's MessageGroupId). The gateway groups by partition
// key, so that competing consumers never hold two events of one key.
func (q *Queue) PublishGrouped(ctx context.Context, bodies [][]byte, groups []string) error {
	if len(groups) != len(bodies) {
		return fmt.Errorf("embedded queue: publish: %d groups for %d messages", len(groups), len(bodies))
	}
	return q.publishing(ctx, bodies, groups)
}

// publishing publishes in the writer's turn, a producer's (it goes before
// the consumers' waiting writes), then wakes this process's idle
// receivers.
func (q *Queue) publishing(ctx context.Context, bodies [][]byte, groups []string) error {
	for i, b := range bodies {
		if b == nil {
			return fmt.Errorf("%w (message %d of the batch)", errNilBody, i)
		}
	}
	if err := q.writing(writeturn.Urgent(ctx), func(ctx context.Context) error { return q.publishBatch(ctx, bodies, groups) }); err != nil {
		return err
	}
	if len(bodies) > 0 {
		q.wakeReceivers()
	}
	return nil
}

func (q *Queue) publishBatch(ctx context.Context, bodies [][]byte, groups []string) error {
	if q.lock != "" {
		// PostgreSQL: one statement is atomic on its own, so it needs no
		// BEGIN and COMMIT of its own: one round trip where a transaction
		// around it took three.
		return q.insert(ctx, q.db, bodies, groups)
	}
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("embedded queue: publish batch: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if err := q.insert(ctx, tx, bodies, groups); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("embedded queue: publish batch: %w", err)
	}
	return nil
}

// PublishGroupedIn is PublishGrouped inside the caller's transaction on the
// queue's database (exec), which commits or rolls back the messages with
// its own writes: the gateway records the identities it accepts with the
// messages it queues. After the commit, the caller calls Published, which
// wakes this process's idle receivers.
func (q *Queue) PublishGroupedIn(ctx context.Context, exec transport.Execer, bodies [][]byte, groups []string) error {
	if len(groups) != len(bodies) {
		return fmt.Errorf("embedded queue: publish: %d groups for %d messages", len(groups), len(bodies))
	}
	return q.insert(ctx, exec, bodies, groups)
}

// Published wakes this process's idle receivers after a commit that
// published (PublishGroupedIn).
func (q *Queue) Published() { q.wakeReceivers() }

// insert adds the messages in their order (seq follows it): on
// PostgreSQL in one statement, the bodies and groups as arrays; on SQLite
// a statement each.
func (q *Queue) insert(ctx context.Context, exec transport.Execer, bodies [][]byte, groups []string) error {
	if len(bodies) == 0 {
		return nil
	}
	now := q.cfg.Now().UnixMicro()
	if groups == nil {
		groups = make([]string, len(bodies))
	}
	if q.lock != "" {
		// With a group, the groups' locks first, in one order (heads.go);
		// each grouped row's trigger then marks it behind its group's
		// earlier messages. Without one no trigger runs: no lock.
		with, where := "", ""
		if slices.ContainsFunc(groups, func(g string) bool { return g != "" }) {
			with = `WITH locked AS (` + pgdb.LockQueueGroupKeys(`SELECT `+pgdb.QueueGroupKey("$1::text", "g")+` AS k
				FROM unnest($4::text[]) AS g WHERE g <> ''`) + `) `
			where = ` WHERE (SELECT n FROM locked) IS NOT NULL`
		}
		if _, err := exec.ExecContext(ctx, with+`INSERT INTO seqbox_queue (queue, body, visible_at, enqueued_at, msg_group)
			SELECT $1, u.b, $2, $2, u.g FROM unnest($3::bytea[], $4::text[]) WITH ORDINALITY AS u(b, g, n)`+where+` ORDER BY u.n`,
			q.cfg.Name, now, bodies, groups); err != nil {
			return fmt.Errorf("embedded queue: publish batch: %w", err)
		}
		return nil
	}
	// One statement prepared for all of them: run as text, each would be
	// parsed and planned again.
	// behind: whether an earlier message of its group is there
	// (heads.go; the schema's trigger would mark it too, a write more).
	const insert = `INSERT INTO seqbox_queue (queue, body, visible_at, enqueued_at, msg_group, behind)
		VALUES ($1, $2, $3, $3, $4, CASE WHEN $4 = '' THEN 0 ELSE EXISTS (SELECT 1 FROM seqbox_queue e
			WHERE e.queue = $1 AND e.msg_group <> '' AND e.msg_group = $4) END)`
	run := exec.ExecContext
	if p, ok := exec.(preparer); ok && len(bodies) > 1 {
		st, err := p.PrepareContext(ctx, insert)
		if err != nil {
			return fmt.Errorf("embedded queue: publish batch: %w", err)
		}
		defer st.Close()
		run = func(ctx context.Context, _ string, args ...any) (sql.Result, error) {
			return st.ExecContext(ctx, args...)
		}
	}
	for i, b := range bodies {
		if _, err := run(ctx, insert, q.cfg.Name, b, now, groups[i]); err != nil {
			return fmt.Errorf("embedded queue: publish batch: %w", err)
		}
	}
	return nil
}

// preparer is an Execer that prepares statements: a transaction, a
// connection or a pool.
type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// Receive leases up to max ready messages, oldest first, waiting up to
// Config.Wait for one to become ready: it looks again every PollInterval,
// and at once when a Queue on the same queue in this process publishes
// (waker). Its first look and a look after a wake-up lease at once; a
// look on its poll first asks a reader whether anything is ready
// (anyReady), so that an idle receiver's polls neither lock the queue
// nor, on SQLite, take the one writer's turn from the process's writes.
func (q *Queue) Receive(ctx context.Context, max int) ([]transport.Delivery, error) {
	deadline := time.Now().Add(q.cfg.Wait)
	lease := true
	for {
		// Taken before the look, so that a publish between the look and
		// the wait still wakes it.
		wake := q.readied()
		var ds []transport.Delivery
		var err error
		if lease || q.anyReady(ctx) {
			err = q.writing(ctx, func(ctx context.Context) (err error) {
				ds, err = q.receiveOnce(ctx, max)
				return err
			})
		}
		if err != nil || len(ds) > 0 || time.Now().After(deadline) {
			return ds, err
		}
		t := time.NewTimer(q.cfg.PollInterval)
		q.waiting.Add(1)
		select {
		case <-ctx.Done():
			q.waiting.Add(-1)
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
			lease = false
		case <-wake:
			t.Stop()
			lease = true
		}
		q.waiting.Add(-1)
	}
}

// waker wakes the idle Receives of one queue in this process. Its channel
// is closed, and forgotten, when a message may have become ready through
// any Queue on it (a publish, a nack without delay, an ack that makes a
// group's next message its head, a Close): an idle Receive waits on it as
// well as on its next poll, so a message made ready in this process is
// received at once. Messages made ready elsewhere (another process, an
// expired lease or delay) wait for the poll.
type waker struct {
	mu sync.Mutex
	ch chan struct{}
}

// wakers holds a waker per queue (database location and name) this
// process opened.
var wakers sync.Map

// wakerFor returns the waker of the queue name in the database at
// location.
func wakerFor(location, name string) *waker {
	w, _ := wakers.LoadOrStore(location+"\x00"+name, &waker{})
	return w.(*waker)
}

// readied returns the channel the next wake-up closes.
func (q *Queue) readied() <-chan struct{} {
	q.wake.mu.Lock()
	defer q.wake.mu.Unlock()
	if q.wake.ch == nil {
		q.wake.ch = make(chan struct{})
	}
	return q.wake.ch
}

// wakeReceivers wakes the Receives of this queue waiting in this process.
func (q *Queue) wakeReceivers() {
	q.wake.mu.Lock()
	defer q.wake.mu.Unlock()
	if q.wake.ch != nil {
		close(q.wake.ch)
		q.wake.ch = nil
	}
}

// leaseText is the receive statement; {{LOCK}} is the dialect's
// row-locking clause for competing receivers.
//
// A message of a group (PublishGrouped) is ready only at the head of its
// group: while an earlier message of the group is unacknowledged (leased
// by any receiver, or waiting out a nack), the later ones stay out of
// every receive, as in an SQS FIFO message group. Only the holder of the
// head can take the next one before it acknowledges the head (TakeNext).
var leaseText = `UPDATE seqbox_queue SET lease = $1, visible_at = $2, attempts = attempts + 1
		WHERE seq IN (SELECT seq FROM seqbox_queue h WHERE ` + headText("$3", "$4") + `
			ORDER BY h.seq LIMIT $5{{LOCK}})
		RETURNING seq, body, attempts, enqueued_at, msg_group`

// headText is the condition of a ready message h of queue at now (the
// statement's parameters): visible, and not behind an earlier message of
// its group (heads.go). The walk stays in the order index's range of
// heads and ungrouped messages.
func headText(queue, now string) string {
	return `h.queue = ` + queue + ` AND h.behind = 0 AND h.visible_at <= ` + now
}

// probeStatement is an idle Receive's look: is any message ready? A read,
// on a reader: it takes no lock and, on SQLite, not the writer's turn.
func (*Queue) probeStatement() string {
	return `SELECT 1 FROM seqbox_queue h WHERE ` + headText("$1", "$2") + ` LIMIT 1`
}

// anyReady reports whether a message may be ready to lease now: a look
// that fails says yes, so that the lease meets (and returns) the error.
func (q *Queue) anyReady(ctx context.Context) bool {
	q.probeOnce.Do(func() {
		// A failed prepare leaves it nil: the look then runs unprepared.
		q.probe, _ = q.db.PrepareContext(context.WithoutCancel(ctx), q.probeSQL)
	})
	var one int
	var err error
	if q.probe != nil {
		err = q.probe.QueryRowContext(ctx, q.cfg.Name, q.cfg.Now().UnixMicro()).Scan(&one)
	} else {
		err = q.db.QueryRowContext(ctx, q.probeSQL, q.cfg.Name, q.cfg.Now().UnixMicro()).Scan(&one)
	}
	return !errors.Is(err, sql.ErrNoRows)
}

// leaseStatement is the receive statement in the queue's dialect.
func (q *Queue) leaseStatement() string {
	text := strings.Replace(leaseText, "{{LOCK}}", q.lock, 1)
	if q.lock != "" {
		// PostgreSQL: the rows the subquery locked are updated by their
		// tuple ids (a TID scan), so the planner cannot join them back
		// another way. By seq, a stale row estimate turned the join into
		// a scan of the whole table: 75 ms for 512 rows of 31,000, against
		// 8 ms by ctid. The locks keep the ids valid until the update.
		text = strings.Replace(text, "WHERE seq IN (SELECT seq ", "WHERE ctid = ANY(ARRAY(SELECT ctid ", 1)
		text = strings.Replace(text, q.lock+")", q.lock+"))", 1)
	}
	return text
}

// lease runs the receive statement: one UPDATE … RETURNING leases a
// whole batch.
func (q *Queue) lease(ctx context.Context, args ...any) (*sql.Rows, error) {
	text := q.leaseSQL
	q.prepareOnce.Do(func() {
		// A failed prepare leaves it nil: the statement then runs
		// unprepared and meets its error there.
		q.receive, _ = q.leasePool().PrepareContext(context.WithoutCancel(ctx), text)
	})
	if q.receive != nil {
		return q.receive.QueryContext(ctx, args...)
	}
	return q.leasePool().QueryContext(ctx, text, args...)
}

func (q *Queue) receiveOnce(ctx context.Context, max int) ([]transport.Delivery, error) {
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return nil, transport.ErrClosed
	}
	if max <= 0 {
		max = 1
	}
	token := newToken()
	now := q.cfg.Now()
	// Oldest first by publication: a redelivery (lease expired, nack) goes
	// before newer messages, as in a FIFO queue. Ordering by visible_at
	// would use the index better but would send every redelivery to the
	// back of the backlog, behind its own key's successors.
	rows, err := q.lease(ctx, token, now.Add(q.cfg.Lease).UnixMicro(), q.cfg.Name, now.UnixMicro(), max)
	if err != nil {
		return nil, fmt.Errorf("embedded queue: receive: %w", err)
	}
	defer rows.Close()
	var out []*delivery
	for rows.Next() {
		d := &delivery{q: q, token: token}
		if err := rows.Scan(&d.seq, &d.body, &d.attempt, &d.enqueued, &d.group); err != nil {
			return nil, fmt.Errorf("embedded queue: receive: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("embedded queue: receive: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	ds := make([]transport.Delivery, len(out))
	for i, d := range out {
		ds[i] = d
	}
	return ds, nil
}

// TakeNext implements transport.NextTaker: in one statement, in the
// writer's turn as a receive, it leases under a new token the message
// right after each head in the head's group, when that message is ready.
// Only the holder of a group's head can: every receive leaves a message
// out while an earlier one of its group is there (leaseText), and the
// head is there until its holder acknowledges it. A head whose lease ran
// out, or was nacked, takes nothing: its holder holds nothing of the
// group any more.
func (q *Queue) TakeNext(ctx context.Context, heads []transport.Delivery) ([]transport.Delivery, error) {
	held, err := q.rows(heads, "take next")
	if err != nil {
		return nil, err
	}
	// A message of no group has no next one: only the grouped are asked
	// for, and none asks nothing, not even the writer's turn.
	held = slices.DeleteFunc(held, func(r leasedRow) bool { return !r.grouped })
	if len(held) == 0 {
		return nil, nil
	}
	token, now := newToken(), q.cfg.Now()
	text, args := takeNextText(q.lock != "", token, now.Add(q.cfg.Lease).UnixMicro(), q.cfg.Name, now.UnixMicro(), held)
	var out []transport.Delivery
	err = q.writing(ctx, func(ctx context.Context) error {
		rows, err := q.leasePool().QueryContext(ctx, text, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var ds []*delivery
		for rows.Next() {
			d := &delivery{q: q, token: token} // a group's next
			if err := rows.Scan(&d.seq, &d.body, &d.attempt, &d.enqueued, &d.group); err != nil {
				return err
			}
			ds = append(ds, d)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i].seq < ds[j].seq })
		for _, d := range ds {
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("embedded queue: take next: %w", err)
	}
	// A head whose next message is taken readies nothing when it is
	// acknowledged (readies).
	byGroup := make(map[string]*delivery, len(heads))
	for _, h := range heads {
		if d, ok := h.(*delivery); ok && d.group != "" {
			byGroup[d.group] = d
		}
	}
	for _, n := range out {
		if h := byGroup[n.(*delivery).group]; h != nil {
			h.next.Store(n.(*delivery))
		}
	}
	return out, nil
}

// takeNextText is TakeNext's statement: the message right after each of
// the heads (in a group, and leased under one of their tokens until after
// now) in its
// group, leased under token until until when it is ready at now. The
// heads are matched as ackStatements matches them: a seq of theirs under
// a token of theirs.
func takeNextText(arrays bool, token string, until int64, queue string, now int64, heads []leasedRow) (string, []any) {
	seqs, tokens := seqsAndTokens(heads)
	next := `(SELECT n.seq FROM seqbox_queue n WHERE n.queue = h.queue AND n.msg_group <> '' AND n.msg_group = h.msg_group
				AND n.seq > h.seq ORDER BY n.seq LIMIT 1)`
	update := `UPDATE seqbox_queue SET lease = $1, visible_at = $2, attempts = attempts + 1
		WHERE seq IN (SELECT ` + next + ` FROM seqbox_queue h WHERE h.queue = $3 AND h.msg_group <> '' AND h.visible_at > $4 AND %s)
		AND queue = $3 AND visible_at <= $4
		RETURNING seq, body, attempts, enqueued_at, msg_group`
	if arrays {
		return fmt.Sprintf(update, `h.seq = ANY($5::bigint[]) AND h.lease = ANY($6::text[])`),
			[]any{token, until, queue, now, seqs, tokens}
	}
	list, _ := json.Marshal(tokens)
	return fmt.Sprintf(update, `h.seq IN (SELECT value FROM json_each($5)) AND h.lease IN (SELECT value FROM json_each($6))`),
		[]any{token, until, queue, now, seqList(seqs), string(list)}
}

// AckBatch deletes every delivery that still holds its lease (ackWith).
func (q *Queue) AckBatch(ctx context.Context, ds []transport.Delivery) error {
	var lost int
	err := q.writing(ctx, func(ctx context.Context) (err error) {
		lost, err = q.ackWith(ctx, q.db, false, ds)
		return err
	})
	if err == nil && readies(ds) {
		q.wakeReceivers() // a group's next message is ready
	}
	if err == nil && lost > 0 {
		err = fmt.Errorf("%w: %d of %d acks", transport.ErrLeaseLost, lost, len(ds))
	}
	return err
}

// ackWith deletes the deliveries that still hold their lease through exec
// (a transaction when inTx), and reports how many had lost it: on
// PostgreSQL one statement per receive, on SQLite one statement for all
// (ackStatements).
func (q *Queue) ackWith(ctx context.Context, exec transport.Execer, inTx bool, ds []transport.Delivery) (int, error) {
	held, err := q.rows(ds, "ack")
	if err != nil {
		return 0, err
	}
	lost := len(held)
	for _, st := range ackStatements(q.lock != "", inTx, held) {
		res, err := exec.ExecContext(ctx, st.text, st.args...)
		if err != nil {
			return 0, fmt.Errorf("embedded queue: ack batch: %w", err)
		}
		n, _ := res.RowsAffected()
		lost -= int(n)
	}
	for _, td := range ds {
		td.(*delivery).settled.Store(true) // q.rows made sure they are q's
	}
	return lost, nil
}

// ExtendBatch pushes the lease of every delivery that still holds it by
// by, in one statement: one commit for all of them, where Extend is one
// each. Like Extend it runs outside the writer turn (a lease is extended
// while a long batch holds the turn; SQLite's busy handler decides). On
// PostgreSQL it skips the rows another transaction has locked (a batch
// acknowledging them, a nack) instead of waiting: holding the rows it
// extended while it waited for those, it could deadlock with a batch
// that acknowledges some of both. A skipped delivery counts as lost here;
// the next round extends it if its batch rolled back.
func (q *Queue) ExtendBatch(ctx context.Context, ds []transport.Delivery, by time.Duration) error {
	if len(ds) == 0 {
		return nil
	}
	held, err := q.rows(ds, "extend")
	if err != nil {
		return err
	}
	seqs, leases := seqsAndTokens(held)
	text, args := extendText(q.lock != "", q.cfg.Now().Add(by).UnixMicro(), leases, seqs)
	res, err := q.db.ExecContext(sqlitedb.WithoutTurn(ctx), text, args...)
	if err != nil {
		return fmt.Errorf("embedded queue: extend batch: %w", err)
	}
	// A row whose seq and lease are both among the deliveries' is one of
	// them: a seq names one row, and the lease is the one received with
	// it, or a later lease of the same row this consumer also holds.
	if n, _ := res.RowsAffected(); int(n) < len(ds) {
		return fmt.Errorf("%w: %d of %d extensions", transport.ErrLeaseLost, len(ds)-int(n), len(ds))
	}
	return nil
}

// own returns td as a delivery of q, or an error naming op when another
// transport or queue handed it out.
func (q *Queue) own(td transport.Delivery, op string) (*delivery, error) {
	d, ok := td.(*delivery)
	if !ok || d.q != q {
		return nil, fmt.Errorf("embedded queue: %s got a delivery from another transport", op)
	}
	return d, nil
}

// extendText is ExtendBatch's statement: the rows seqs still leased under
// one of leases become visible at at. Its text is the same whatever the
// counts (see ackStatements).
func extendText(arrays bool, at int64, leases []string, seqs []int64) (string, []any) {
	if arrays {
		return `UPDATE seqbox_queue SET visible_at = $1 WHERE ctid = ANY(ARRAY(SELECT ctid FROM seqbox_queue
			WHERE lease = ANY($2::text[]) AND seq = ANY($3::bigint[]) FOR UPDATE SKIP LOCKED))`,
			[]any{at, leases, seqs}
	}
	tokens, _ := json.Marshal(leases)
	return `UPDATE seqbox_queue SET visible_at = ? WHERE lease IN (SELECT value FROM json_each(?))
		AND seq IN (SELECT value FROM json_each(?))`, []any{at, string(tokens), seqList(seqs)}
}

// leasedRow is a delivery's row and the lease it was received under.
type leasedRow struct {
	seq   int64
	token string
	// grouped: the message is in a group (PublishGrouped), whose lock
	// its ack takes on PostgreSQL (heads.go).
	grouped bool
}

// rows returns ds as rows of q, or an error naming op when one was handed
// out by another transport or queue (own).
func (q *Queue) rows(ds []transport.Delivery, op string) ([]leasedRow, error) {
	out := make([]leasedRow, 0, len(ds))
	for _, td := range ds {
		d, err := q.own(td, op)
		if err != nil {
			return nil, err
		}
		out = append(out, leasedRow{seq: d.seq, token: d.token, grouped: d.group != ""})
	}
	return out, nil
}

// seqsAndTokens returns rows' seqs, and their distinct lease tokens in
// the order they first appear.
func seqsAndTokens(rows []leasedRow) (seqs []int64, tokens []string) {
	seqs = make([]int64, len(rows))
	for i, r := range rows {
		seqs[i] = r.seq
		if !slices.Contains(tokens, r.token) {
			tokens = append(tokens, r.token)
		}
	}
	return seqs, tokens
}

// ackStatement is one statement of an acknowledgement.
type ackStatement struct {
	text string
	args []any
}

// ackStatements delete the rows of held that still hold their leases.
// Each text is the same whatever the count of rows, so that it is parsed
// or prepared once per connection where the driver keeps statements:
//
//   - On PostgreSQL, one statement per lease token, its seqs one array
//     parameter; the statement stays prepared on every connection.
//   - On SQLite, one statement for the whole batch, each row found by its
//     seq: the seqs one JSON array and the receives' tokens another, which
//     json_each unpacks. SQLite's driver parses a statement again at every
//     call, and a batch's deliveries come from several receives: one
//     statement is one parse per batch, where a statement per token would
//     be several, and a placeholder per seq a parse of up to 512 of them
//     (docs/benchmarks-history.md §15).
//
// On PostgreSQL a statement whose rows include a grouped message takes
// their groups' locks first (lockedDelete); one of ungrouped messages
// only (the core's) takes none. In a transaction (inTx) where more than
// one statement locks groups, one statement before them takes every
// group's lock in key order.
//
// On SQLite a row whose seq is one of held's and whose lease is one of
// held's tokens, but not the pair held names, goes too. That row is a
// message this batch holds under one lease while the row holds another
// of this batch's receives: the same message, received again by this
// consumer after its first lease ran out. The ack deletes it only for a
// message whose outcome the batch records, which is what acknowledging
// it means; the other delivery's own ack then finds it gone (lost). A
// row leased by a receive this batch did not make is never touched, and
// neither is one whose seq it does not hold. ExtendBatch matches rows the
// same way. Exact pairs cost the ack a row value per row: 71% more of
// its CPU in the same benchmark.
func ackStatements(arrays, inTx bool, held []leasedRow) []ackStatement {
	if !arrays {
		seqs, tokens := seqsAndTokens(held)
		list, _ := json.Marshal(tokens)
		return []ackStatement{{`DELETE FROM seqbox_queue WHERE seq IN (SELECT value FROM json_each(?))
			AND lease IN (SELECT value FROM json_each(?))`, []any{seqList(seqs), string(list)}}}
	}
	byToken := map[string][]int64{}
	var tokens, locking []string
	var groupedSeqs []int64
	for _, l := range held {
		if _, ok := byToken[l.token]; !ok {
			tokens = append(tokens, l.token)
		}
		byToken[l.token] = append(byToken[l.token], l.seq)
		if l.grouped {
			groupedSeqs = append(groupedSeqs, l.seq)
			if !slices.Contains(locking, l.token) {
				locking = append(locking, l.token)
			}
		}
	}
	out := make([]ackStatement, 0, len(tokens)+1)
	if inTx && len(locking) > 1 {
		// Several statements that lock groups, in one transaction (AckIn):
		// every group's lock first, in one order, as one statement takes
		// its own (heads.go). Outside one each statement is its own, and
		// its locks end with it.
		out = append(out, ackStatement{pgdb.LockQueueGroups(`seq = ANY($1::bigint[])`), []any{groupedSeqs}})
	}
	const where = `lease = $1 AND seq = ANY($2::bigint[])`
	for _, t := range tokens {
		text := `DELETE FROM seqbox_queue WHERE ` + where // no group: no lock
		if slices.Contains(locking, t) {
			text = lockedDelete(where)
		}
		out = append(out, ackStatement{text, []any{t, byToken[t]}})
	}
	return out
}

// lockedDelete is PostgreSQL's DELETE of the rows where selects, after
// their groups' locks in key order (heads.go).
func lockedDelete(where string) string {
	return `WITH locked AS (` + pgdb.LockQueueGroups(where) + `)
			DELETE FROM seqbox_queue WHERE ` + where + ` AND (SELECT n FROM locked) IS NOT NULL`
}

// seqList is seqs as a JSON array, for SQLite's json_each.
func seqList(seqs []int64) string {
	list := make([]byte, 0, 2+8*len(seqs))
	list = append(list, '[')
	for i, s := range seqs {
		if i > 0 {
			list = append(list, ',')
		}
		list = strconv.AppendInt(list, s, 10)
	}
	return string(append(list, ']'))
}

// Depth reports the messages not yet acknowledged: ready ones and ones
// leased to a consumer.
func (q *Queue) Depth(ctx context.Context) (ready, leased int, err error) {
	now := q.cfg.Now().UnixMicro()
	err = q.db.QueryRowContext(ctx, `SELECT
		COALESCE(SUM(CASE WHEN visible_at <= $2 THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN visible_at > $2 THEN 1 ELSE 0 END), 0)
		FROM seqbox_queue WHERE queue = $1`, q.cfg.Name, now).Scan(&ready, &leased)
	return ready, leased, err
}

// Close closes the queue's pool.
func (q *Queue) Close() error {
	// The idle Receives look again, and meet the close.
	defer q.wakeReceivers()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	// A prepare under way finishes first, and none starts from now on:
	// the statements are read after it, not beside it.
	q.prepareOnce.Do(func() {})
	q.probeOnce.Do(func() {})
	for _, st := range []*sql.Stmt{q.receive, q.probe} {
		if st != nil {
			st.Close()
		}
	}
	if q.leases != nil {
		q.leases.Close()
	}
	return q.db.Close()
}

// leasePool is the pool receives run on.
func (q *Queue) leasePool() *sql.DB {
	if q.leases != nil {
		return q.leases
	}
	return q.db
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// delivery is one leased message.
type delivery struct {
	q       *Queue
	seq     int64
	body    []byte
	attempt int
	token   string
	// enqueued is when it was published, in Unix microseconds.
	enqueued int64
	// group is the group it was published in ("" for none; a group
	// never changes).
	group string
	// next is the message after it in its group, when TakeNext took it:
	// while that one is not settled, its acknowledgement readies nothing
	// (readies).
	next atomic.Pointer[delivery]
	// settled: acknowledged or nacked through this delivery.
	settled atomic.Bool
}

func (d *delivery) Body() []byte { return d.body }
func (d *delivery) Attempt() int { return d.attempt }

// PublishedAt implements transport.PublishTimer: when the message was
// published.
func (d *delivery) PublishedAt() time.Time { return time.UnixMicro(d.enqueued).UTC() }

func (d *delivery) settle(ctx context.Context, what, query string, args ...any) error {
	var res sql.Result
	exec := func(ctx context.Context) (err error) {
		res, err = d.q.db.ExecContext(ctx, query, args...)
		return err
	}
	var err error
	if what == "extend" {
		// Not in the writer turn: a lease is extended while a long batch
		// holds it (SQLite's busy handler then decides).
		err = exec(sqlitedb.WithoutTurn(ctx))
	} else {
		err = d.q.writing(ctx, exec)
	}
	if err != nil {
		return fmt.Errorf("embedded queue: %s message %d: %w", what, d.seq, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: %s message %d", transport.ErrLeaseLost, what, d.seq)
	}
	if what != "extend" {
		d.settled.Store(true)
	}
	return nil
}

// Ack deletes the message if this delivery still holds its lease.
func (d *delivery) Ack(ctx context.Context) error {
	query := `DELETE FROM seqbox_queue WHERE seq = $1 AND lease = $2`
	if d.q.lock != "" && d.group != "" {
		query = lockedDelete(`seq = $1 AND lease = $2`)
	}
	err := d.settle(ctx, "ack", query, d.seq, d.token)
	if err == nil && readies([]transport.Delivery{d}) {
		d.q.wakeReceivers() // a group's next message is ready
	}
	return err
}

// Nack makes the message visible again after delay.
func (d *delivery) Nack(ctx context.Context, delay time.Duration) error {
	at := d.q.cfg.Now().Add(delay).UnixMicro()
	err := d.settle(ctx, "nack", `UPDATE seqbox_queue SET lease = '', visible_at = $3 WHERE seq = $1 AND lease = $2`,
		d.seq, d.token, at)
	if err == nil && delay <= 0 {
		d.q.wakeReceivers()
	}
	return err
}

// Extend pushes the lease forward.
func (d *delivery) Extend(ctx context.Context, by time.Duration) error {
	at := d.q.cfg.Now().Add(by).UnixMicro()
	return d.settle(ctx, "extend", `UPDATE seqbox_queue SET visible_at = $3 WHERE seq = $1 AND lease = $2`,
		d.seq, d.token, at)
}

// ensureGroups adds the message group column and its index to a queue
// made before groups existed. It is a step in Go rather than a file of
// migrations/ because SQLite has no ADD COLUMN IF NOT EXISTS, and every
// step of the queue runs on each open.
func ensureGroups(ctx context.Context, tx *sql.Tx, d dialect.SQL) error {
	has, err := hasColumn(ctx, tx, d, "msg_group")
	if err != nil {
		return err
	}
	if !has {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE seqbox_queue ADD COLUMN msg_group TEXT NOT NULL DEFAULT ''`); err != nil {
			return err
		}
	}
	return ensureGroupIndex(ctx, tx, d)
}

// groupIndex is the index the receive looks up a message's group
// predecessors in. It holds grouped messages only: a queue published
// without groups (Publish, PublishBatch) writes no entry in it, so such a
// publish maintains two indexes, not three (a 20,000-row publish on
// PostgreSQL: 171 ms with every row indexed, 108–120 ms without).
const groupIndex = `CREATE INDEX IF NOT EXISTS seqbox_queue_group ON seqbox_queue (queue, msg_group, seq) WHERE msg_group <> ''`

// hasColumn reports whether the queue's table has column (in the
// current schema on PostgreSQL).
func hasColumn(ctx context.Context, tx *sql.Tx, d dialect.SQL, column string) (bool, error) {
	probe := `SELECT COUNT(*) FROM pragma_table_info('seqbox_queue') WHERE name = $1`
	if d == dialect.Postgres {
		probe = `SELECT COUNT(*) FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = 'seqbox_queue' AND column_name = $1`
	}
	var n int
	err := tx.QueryRowContext(ctx, probe, column).Scan(&n)
	return n > 0, err
}

// ensureGroupIndex replaces the group index of a queue made when it held
// every row, and creates it where it is missing.
func ensureGroupIndex(ctx context.Context, tx *sql.Tx, d dialect.SQL) error {
	probe := `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'seqbox_queue_group'`
	if d == dialect.Postgres {
		probe = `SELECT indexdef FROM pg_catalog.pg_indexes WHERE schemaname = current_schema() AND indexname = 'seqbox_queue_group'`
	}
	var def string
	switch err := tx.QueryRowContext(ctx, probe).Scan(&def); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	case !strings.Contains(strings.ToUpper(def), "WHERE"):
		if _, err := tx.ExecContext(ctx, `DROP INDEX seqbox_queue_group`); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, groupIndex)
	return err
}

// ensureHOT makes the PostgreSQL queue's leases heap-only updates (HOT):
// a receive rewrites every row it leases (lease, visible_at, attempts),
// and a row update that changes no indexed column and finds room on its
// page adds no index entry. So the index that the receive walks in
// publication order, seqbox_queue_order, is on (queue, seq) alone (the
// walk reads visible_at from the row), and pages keep half their room
// for the leased versions (fillfactor 40: a new version needs a line
// pointer too, and at 50 one lease in twelve still missed its page). With (queue, seq, visible_at),
// every lease of 512 rows wrote 1,536 index entries (three indexes), and
// the receive was the pipeline's costliest statement on the server.
//
// It runs on every open, after the migrations, and changes only what is
// not so yet: 002 creates seqbox_queue_order only if missing, so the
// index keeps its name and the migration leaves it alone. SQLite has no
// such updates and keeps the index of 002.
func ensureHOT(ctx context.Context, tx *sql.Tx) error {
	var def, opts string
	if err := tx.QueryRowContext(ctx, `SELECT i.indexdef, COALESCE(array_to_string(c.reloptions, ','), '')
		FROM pg_catalog.pg_indexes i JOIN pg_catalog.pg_class c ON c.oid = 'seqbox_queue'::regclass
		WHERE i.schemaname = current_schema() AND i.indexname = 'seqbox_queue_order'`).Scan(&def, &opts); err != nil {
		return err
	}
	var stmts []string
	if !strings.Contains(opts, "fillfactor=40") {
		stmts = append(stmts, `ALTER TABLE seqbox_queue SET (fillfactor = 40)`)
	}
	if !strings.Contains(def, "behind") {
		stmts = append(stmts, `DROP INDEX seqbox_queue_order`, `CREATE INDEX seqbox_queue_order ON seqbox_queue (queue, behind, seq)`)
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

var _ transport.PublishTimer = (*delivery)(nil)
