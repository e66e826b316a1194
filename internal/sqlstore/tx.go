package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"syscall"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// Executor runs the driver's statements on the pool, or inside one
// transaction (then it is also a store.ExecutorTx).
type Executor struct {
	// db is the pool, or tx.
	db interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
	// tx is the transaction (nil on the pool).
	tx *sql.Tx
	// pool is the store's pool, where work outside a transaction that
	// needs one opens its own.
	pool    *sql.DB
	lockRow string
	// serialWriters says the database runs one write transaction at a
	// time (SQLite); otherwise a transaction that must reserve something
	// no row stands for yet takes an advisory lock (businessKeyLock).
	serialWriters bool
	// arrays says a batch's rows go in one statement, a column per array
	// parameter (Dialect.Arrays).
	arrays bool
	// positional rewrites $n placeholders as ? (Dialect.Positional).
	positional bool
	// storageFull is the driver's classifier (Dialect.StorageFull).
	storageFull func(error) bool
	stmts       *stmtCache
	// unlock gives the writer's turn back at commit or rollback (nil
	// when the store does not serialize writers).
	unlock func()
	// group, on the pool of a store with one writer, commits exec's
	// writes together with other callers' (groupCommit).
	group *groupCommit
	// carried are the pool's queued writes this transaction runs too
	// (groupCommit.carry): told their results when it commits, queued
	// again when it rolls back.
	carried []*groupJob
	// carrier is the group whose writes go back to its queue on rollback.
	carrier *groupCommit
	// ended: Commit or Rollback ran; a later Commit carries nothing.
	ended bool
	// pipes, on the pool of a store that pipelines, sends single's
	// statements together with other callers' (pipeGroup).
	pipes *pipeGroup
	// pipeline, in a transaction that pipelines (pipeTx), sends
	// statements together, one round trip for all (Dialect.Pipeline);
	// nil elsewhere.
	pipeline func(ctx context.Context, stmts []store.Statement) ([]int64, error)
}

var _ store.ExecutorTx = (*Executor)(nil)

// SQL returns the transaction for the handler's business writes.
func (t *Executor) SQL() *sql.Tx { return t.tx }

// ExecContext runs query with args in the transaction as *sql.Tx's
// ExecContext does, prepared once through the store's statement cache
// where the store keeps one (SQLite): it is the transport.Execer a
// transport that acknowledges in the store's transaction writes through
// (batchTx.execer). On *sql.Tx the embedded queue's acknowledgement was
// prepared again in every batch, its delete trigger compiled with it:
// three quarters of the SQLite statements prepared in the agent path, a
// tenth of its applier's time.
func (t *Executor) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.exec(ctx, query, args...)
}

// Savepoint opens a savepoint.
func (t *Executor) Savepoint(ctx context.Context, name string) error {
	_, err := t.exec(ctx, "SAVEPOINT "+name)
	return err
}

// SavepointRollback undoes everything since the savepoint, which stays open.
func (t *Executor) SavepointRollback(ctx context.Context, name string) error {
	_, err := t.exec(ctx, "ROLLBACK TO SAVEPOINT "+name)
	return err
}

// SavepointRelease closes the savepoint, keeping its work.
func (t *Executor) SavepointRelease(ctx context.Context, name string) error {
	_, err := t.exec(ctx, "RELEASE SAVEPOINT "+name)
	return err
}

// Commit commits the batch. On a store with one writer it first takes
// the pool's writes queued while it ran (groupCommit.carry), so that
// they share its COMMIT instead of waiting for the next transaction to
// begin: a pending row an agent's call waits for commits with the
// transaction under way. That is the same as committing them in a
// transaction of their own right after this one, in its fsync.
func (t *Executor) Commit() error {
	if t.carrier != nil && !t.ended {
		if err := t.carrier.carry(t); err != nil {
			// A state no savepoint explains: nothing of this transaction
			// may commit (carry told the writes it ran their error).
			rerr := t.Rollback()
			return errors.Join(fmt.Errorf("commit: carrying the writes queued on the pool: %w", err), rerr)
		}
	}
	defer t.endTurn()
	t.ended = true
	err := t.storageError("commit", t.tx.Commit())
	if len(t.carried) > 0 {
		finish(t.carried, err)
		t.carried = nil
	}
	return err
}

func (t *Executor) endTurn() {
	if t.unlock != nil {
		t.unlock()
	}
}

// storageError says in words what a failed write most likely means when
// the database reports an I/O or disk-full error.
func (t *Executor) storageError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ENOSPC) || (t.storageFull != nil && t.storageFull(err)) {
		return fmt.Errorf("%s: %w: nothing of this batch was applied (it rolled back); free space and deliver it again — a running consumer redelivers it by itself: %w",
			op, store.ErrStorageFull, err)
	}
	return err
}

// Rollback abandons the batch.
func (t *Executor) Rollback() error {
	defer t.endTurn()
	t.ended = true
	err := t.tx.Rollback()
	if len(t.carried) > 0 {
		t.carrier.requeue(t.carried)
		t.carried = nil
	}
	return err
}

// InboxInsert inserts an identity; the primary key arbitrates.
func (t *Executor) InboxInsert(ctx context.Context, r store.InboxRow) (bool, error) {
	res, err := t.exec(ctx, `INSERT INTO seqbox_inbox
		(consumer, source, id, payload_hash, businesskey, event_type, tenant, contract_version,
		 partitionkey, objectversion, outcome, received_at, processed_at, result_reference, retention_until, causation)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
		ON CONFLICT (consumer, source, id) DO NOTHING`,
		r.Consumer, r.Source, r.ID, r.PayloadHash, r.BusinessKey, r.EventType, r.Tenant, r.ContractVersion,
		r.PartitionKey, optInt(r.ObjectVersion), r.Outcome, micros(r.ReceivedAt), optMicros(r.ProcessedAt),
		r.ResultReference, micros(r.RetentionUntil), r.CausationID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// InboxGet reads one identity.
func (t *Executor) InboxGet(ctx context.Context, p store.MessageRef) (store.InboxRow, error) {
	r := store.InboxRow{Consumer: p.Consumer, Source: p.Source, ID: p.ID}
	err := scanInbox(t.queryRow(ctx, `SELECT `+inboxColumns+`
		FROM seqbox_inbox WHERE consumer = $1 AND source = $2 AND id = $3`, p.Consumer, p.Source, p.ID), &r)
	if errors.Is(err, sql.ErrNoRows) {
		return r, store.ErrNotFound
	}
	return r, err
}

// InboxList reads identities by tenant, cause and contract, newest first. Each
// filter says its column is not empty, as the partial indexes of
// migration 017 do, so that a planner that cannot see a parameter's value
// still knows the index holds every row the query wants.
func (t *Executor) InboxList(ctx context.Context, p store.InboxListParams) ([]store.InboxRow, error) {
	if p.Tenant == "" && p.CausationID == "" && p.DataSchema == "" {
		return nil, errors.New("inbox list: a tenant, a causation id or a dataschema is required")
	}
	if p.Limit < 1 {
		return nil, fmt.Errorf("inbox list: limit %d: at least 1", p.Limit)
	}
	q, args := inboxListQuery(p)
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.InboxRow
	for rows.Next() {
		r := store.InboxRow{Consumer: p.Consumer}
		if err := scanInbox(prefixed{rows, []any{&r.Source, &r.ID}}, &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// inboxListQuery is InboxList's statement for p's filters.
func inboxListQuery(p store.InboxListParams) (string, []any) {
	q := `SELECT source, id, ` + inboxColumns + ` FROM seqbox_inbox WHERE consumer = $1`
	args := []any{p.Consumer}
	if p.Tenant != "" {
		args = append(args, p.Tenant)
		q += fmt.Sprintf(` AND tenant = $%d AND tenant <> ''`, len(args))
	}
	if p.CausationID != "" {
		args = append(args, p.CausationID)
		q += fmt.Sprintf(` AND causation = $%d AND causation <> ''`, len(args))
	}
	if p.DataSchema != "" {
		args = append(args, p.DataSchema)
		q += fmt.Sprintf(` AND contract_version = $%d AND contract_version <> ''`, len(args))
	}
	args = append(args, p.Limit)
	q += fmt.Sprintf(` ORDER BY received_at DESC, source DESC, id DESC LIMIT $%d`, len(args))
	return q, args
}

// prefixed scans the columns before scanInbox's into dst first.
type prefixed struct {
	row interface{ Scan(...any) error }
	dst []any
}

// Scan implements scanInbox's row.
func (p prefixed) Scan(dst ...any) error { return p.row.Scan(append(p.dst, dst...)...) }

// inboxColumns are the columns scanInbox reads, after the identity.
const inboxColumns = `payload_hash, businesskey, event_type, tenant, contract_version,
		partitionkey, objectversion, outcome, received_at, processed_at, result_reference, retention_until, causation`

// scanInbox reads inboxColumns into r, whose identity is already set.
func scanInbox(row interface{ Scan(...any) error }, r *store.InboxRow) error {
	var ver, processed sql.NullInt64
	var received, retention int64
	if err := row.Scan(&r.PayloadHash, &r.BusinessKey, &r.EventType, &r.Tenant, &r.ContractVersion, &r.PartitionKey,
		&ver, &r.Outcome, &received, &processed, &r.ResultReference, &retention, &r.CausationID); err != nil {
		return err
	}
	r.ObjectVersion = ptrInt(ver)
	r.ReceivedAt = time.UnixMicro(received).UTC()
	if processed.Valid {
		p := fromMicros(processed)
		r.ProcessedAt = &p
	}
	r.RetentionUntil = time.UnixMicro(retention).UTC()
	return nil
}

// InboxSetOutcome records the final outcome of an identity.
func (t *Executor) InboxSetOutcome(ctx context.Context, p store.InboxSetOutcomeParams) error {
	consumer, source, id, outcome, processedAt := p.Consumer, p.Source, p.ID, p.Outcome, p.ProcessedAt
	if p.ResultReference != "" {
		_, err := t.exec(ctx, `UPDATE seqbox_inbox SET outcome = $4, processed_at = $5, result_reference = $6
			WHERE consumer = $1 AND source = $2 AND id = $3`, consumer, source, id, outcome, optMicros(processedAt), p.ResultReference)
		return err
	}
	_, err := t.exec(ctx, `UPDATE seqbox_inbox SET outcome = $4, processed_at = $5
		WHERE consumer = $1 AND source = $2 AND id = $3`, consumer, source, id, outcome, optMicros(processedAt))
	return err
}

// InboxDelete forgets an identity.
func (t *Executor) InboxDelete(ctx context.Context, p store.MessageRef) error {
	consumer, source, id := p.Consumer, p.Source, p.ID
	_, err := t.exec(ctx, `DELETE FROM seqbox_inbox WHERE consumer = $1 AND source = $2 AND id = $3`,
		consumer, source, id)
	return err
}

// BusinessKeyClaim is the unique insert of (consumer, businesskey).
func (t *Executor) BusinessKeyClaim(ctx context.Context, p store.BusinessKeyClaimParams) (bool, error) {
	consumer, businessKey, source, id, at := p.Consumer, p.BusinessKey, p.Source, p.ID, p.At
	res, err := t.exec(ctx, `INSERT INTO seqbox_business_keys (consumer, businesskey, source, id, applied_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (consumer, businesskey) DO NOTHING`,
		consumer, businessKey, source, id, micros(at))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

const keyColumns = `consumer, partitionkey, version, blocked, blocked_source, blocked_id, blocked_reason, blocked_since, updated_at, baseline`

func scanKey(row interface{ Scan(...any) error }) (store.KeyState, error) {
	var k store.KeyState
	var ver, since, base sql.NullInt64
	var blocked int
	var updated int64
	if err := row.Scan(&k.Consumer, &k.Key, &ver, &blocked, &k.BlockedSource, &k.BlockedID, &k.BlockedReason, &since, &updated, &base); err != nil {
		return k, err
	}
	k.Version, k.Baseline = ptrInt(ver), ptrInt(base)
	k.Blocked = blocked != 0
	k.BlockedSince = fromMicros(since)
	k.UpdatedAt = time.UnixMicro(updated).UTC()
	return k, nil
}

// KeyLock reads a key's ordering state, with whether anything is parked or
// retrying on it, and locks the key row.
//
// On PostgreSQL the flags are read by a statement of their own, after the
// lock is granted: in READ COMMITTED, a SELECT … FOR UPDATE that waited
// for the lock re-reads the locked row but evaluates everything else with
// the snapshot it started with, and would miss a message a concurrent
// transaction parked on the key just before releasing it.
func (t *Executor) KeyLock(ctx context.Context, p store.KeyRef) (store.KeyState, error) {
	consumer, key := p.Consumer, p.Key
	const flags = `CASE WHEN EXISTS (SELECT 1 FROM seqbox_parked p WHERE p.consumer = $1 AND p.partitionkey = $2) THEN 1 ELSE 0 END,
		CASE WHEN EXISTS (SELECT 1 FROM seqbox_retries r WHERE r.consumer = $1 AND r.partitionkey = $2) THEN 1 ELSE 0 END`
	var parked, retries int
	var k store.KeyState
	var err error
	if t.lockRow == "" {
		k, err = scanKey(extraColumns{t.queryRow(ctx, `SELECT `+keyColumns+`, `+flags+`
			FROM seqbox_keys WHERE consumer = $1 AND partitionkey = $2`, consumer, key), []any{&parked, &retries}})
	} else {
		k, err = scanKey(t.queryRow(ctx, `SELECT `+keyColumns+` FROM seqbox_keys
			WHERE consumer = $1 AND partitionkey = $2`+t.lockRow, consumer, key))
		if err == nil {
			err = t.queryRow(ctx, `SELECT `+flags, consumer, key).Scan(&parked, &retries)
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return k, store.ErrNotFound
	}
	k.HasParked, k.HasRetries = parked != 0, retries != 0
	return k, err
}

// extraColumns scans columns after the ones scanKey reads into extra.
type extraColumns struct {
	row   interface{ Scan(...any) error }
	extra []any
}

func (e extraColumns) Scan(dest ...any) error { return e.row.Scan(append(dest, e.extra...)...) }

// KeyEnsure creates the key row if it is missing.
func (t *Executor) KeyEnsure(ctx context.Context, p store.KeyEnsureParams) error {
	consumer, key, at := p.Consumer, p.Key, p.At
	_, err := t.exec(ctx, `INSERT INTO seqbox_keys (consumer, partitionkey, updated_at)
		VALUES ($1, $2, $3) ON CONFLICT (consumer, partitionkey) DO NOTHING`, consumer, key, micros(at))
	return err
}

// KeyAdvance compares and sets the key version.
func (t *Executor) KeyAdvance(ctx context.Context, p store.KeyAdvanceParams) (bool, error) {
	prev := int64(-1)
	if p.Prev != nil {
		prev = *p.Prev
	}
	res, err := t.exec(ctx, `UPDATE seqbox_keys SET version = $3, updated_at = $5, baseline = COALESCE(baseline, $3)
		WHERE consumer = $1 AND partitionkey = $2 AND COALESCE(version, -1) = $4`, p.Consumer, p.Key, p.Next, prev, micros(p.At))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// KeyBlock blocks a key.
func (t *Executor) KeyBlock(ctx context.Context, p store.KeyBlockParams) error {
	consumer, key, source, id, reason, at := p.Consumer, p.Key, p.Source, p.ID, p.Reason, p.At
	_, err := t.exec(ctx, `UPDATE seqbox_keys SET blocked = 1, blocked_source = $3, blocked_id = $4,
		blocked_reason = $5, blocked_since = $6, updated_at = $6 WHERE consumer = $1 AND partitionkey = $2`,
		consumer, key, source, id, reason, micros(at))
	return err
}

// KeyUnblock clears a key's block.
func (t *Executor) KeyUnblock(ctx context.Context, p store.KeyUnblockParams) error {
	consumer, key, at := p.Consumer, p.Key, p.At
	_, err := t.exec(ctx, `UPDATE seqbox_keys SET blocked = 0, blocked_source = '', blocked_id = '',
		blocked_reason = '', blocked_since = NULL, updated_at = $3 WHERE consumer = $1 AND partitionkey = $2`,
		consumer, key, micros(at))
	return err
}

// ParkedInsert stores a message in the parked table. A colliding payload already
// parked is not parked twice.
func (t *Executor) ParkedInsert(ctx context.Context, p store.Parked) error {
	_, err := t.exec(ctx, `INSERT INTO seqbox_parked
		(consumer, source, id, partitionkey, objectversion, reason, detail, envelope, payload_hash, parked_at, hold_until)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`,
		p.Consumer, p.Source, p.ID, p.PartitionKey, optInt(p.ObjectVersion), p.Reason, p.Detail, p.Envelope,
		p.PayloadHash, micros(p.ParkedAt), zeroNullMicros(p.HoldUntil))
	return err
}

const parkedColumns = `seq, consumer, source, id, partitionkey, objectversion, reason, detail, envelope, payload_hash, parked_at, hold_until`

func scanParked(rows *sql.Rows) ([]store.Parked, error) {
	defer rows.Close()
	var out []store.Parked
	for rows.Next() {
		var p store.Parked
		var ver, hold sql.NullInt64
		var parked int64
		if err := rows.Scan(&p.Seq, &p.Consumer, &p.Source, &p.ID, &p.PartitionKey, &ver, &p.Reason, &p.Detail,
			&p.Envelope, &p.PayloadHash, &parked, &hold); err != nil {
			return nil, err
		}
		p.ObjectVersion = ptrInt(ver)
		p.ParkedAt = time.UnixMicro(parked).UTC()
		p.HoldUntil = fromMicros(hold)
		out = append(out, p)
	}
	return out, rows.Err()
}

// ParkedListInLine lists a key's held and blocked messages in version order,
// unversioned ones by arrival.
func (t *Executor) ParkedListInLine(ctx context.Context, p store.KeyRef) ([]store.Parked, error) {
	consumer, key := p.Consumer, p.Key
	rows, err := t.query(ctx, `SELECT `+parkedColumns+` FROM seqbox_parked
		WHERE consumer = $1 AND partitionkey = $2 AND reason IN ('held', 'blocked')
		ORDER BY COALESCE(objectversion, -1), seq`, consumer, key)
	if err != nil {
		return nil, err
	}
	return scanParked(rows)
}

// ParkedPage lists a page of a key's parked messages in
// ParkedListInLine's order (version, none first, then seq).
func (t *Executor) ParkedPage(ctx context.Context, p store.ParkedPageParams) ([]store.Parked, error) {
	if p.Consumer == "" || p.Key == "" || p.Limit <= 0 {
		return nil, fmt.Errorf("parked page: consumer %q, key %q, limit %d: want a consumer, a key and a limit above zero", p.Consumer, p.Key, p.Limit)
	}
	q := `SELECT ` + parkedColumns + ` FROM seqbox_parked
		WHERE consumer = $1 AND partitionkey = $2 AND ($3 = '' OR reason = $3)`
	args := []any{p.Consumer, p.Key, string(p.Reason), p.Limit}
	if p.After != nil {
		q += ` AND (COALESCE(objectversion, -1) > $5 OR (COALESCE(objectversion, -1) = $5 AND seq > $6))`
		args = append(args, p.After.Version, p.After.Seq)
	}
	rows, err := t.query(ctx, q+` ORDER BY COALESCE(objectversion, -1), seq LIMIT $4`, args...)
	if err != nil {
		return nil, err
	}
	return scanParked(rows)
}

// ParkedCollisionList lists a consumer's collisions through the partial
// index that keeps each colliding payload once.
func (t *Executor) ParkedCollisionList(ctx context.Context, p store.ParkedCollisionListParams) ([]store.Parked, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("collisions: limit %d: want one or more", p.Limit)
	}
	q, args := parkedCollisionListQuery(t.arrays, p)
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanParked(rows)
}

// parkedCollisionListQuery is ParkedCollisionList's statement: reason =
// 'collision' written as a literal, as the partial index's condition is.
// SQLite, without statistics, preferred the key index (every parked
// message of the consumer) and is told which index to use; PostgreSQL
// (the store with arrays) has no INDEXED BY.
func parkedCollisionListQuery(arrays bool, p store.ParkedCollisionListParams) (string, []any) {
	indexed := " INDEXED BY seqbox_parked_collision_once"
	if arrays {
		indexed = ""
	}
	return `SELECT ` + parkedColumns + ` FROM seqbox_parked` + indexed + `
		WHERE consumer = $1 AND reason = 'collision' ORDER BY seq LIMIT $2`, []any{p.Consumer, p.Limit}
}

// ParkedOfIdentity lists one identity's parked messages, oldest first.
func (t *Executor) ParkedOfIdentity(ctx context.Context, p store.MessageRef) ([]store.Parked, error) {
	rows, err := t.query(ctx, `SELECT `+parkedColumns+` FROM seqbox_parked
		WHERE consumer = $1 AND source = $2 AND id = $3 ORDER BY seq`, p.Consumer, p.Source, p.ID)
	if err != nil {
		return nil, err
	}
	return scanParked(rows)
}

// ParkedDelete removes one parked row.
func (t *Executor) ParkedDelete(ctx context.Context, seq int64) error {
	_, err := t.exec(ctx, `DELETE FROM seqbox_parked WHERE seq = $1`, seq)
	return err
}

// ParkedSetReason moves a key's parked rows from one reason to another.
func (t *Executor) ParkedSetReason(ctx context.Context, p store.ParkedSetReasonParams) error {
	consumer, key, from, to, holdUntil := p.Consumer, p.Key, p.From, p.To, p.HoldUntil
	_, err := t.exec(ctx, `UPDATE seqbox_parked SET reason = $4, hold_until = $5
		WHERE consumer = $1 AND partitionkey = $2 AND reason = $3`, consumer, key, from, to, zeroNullMicros(holdUntil))
	return err
}

// ParkedStartHolds sets a hold deadline on held rows that have none and,
// with Now, on those whose deadline ran out by then.
func (t *Executor) ParkedStartHolds(ctx context.Context, p store.ParkedStartHoldsParams) error {
	ranOut := int64(math.MinInt64) // no deadline is that old
	if !p.Now.IsZero() {
		ranOut = micros(p.Now)
	}
	_, err := t.exec(ctx, `UPDATE seqbox_parked SET hold_until = $3
		WHERE consumer = $1 AND partitionkey = $2 AND reason = 'held' AND (hold_until IS NULL OR hold_until <= $4)`,
		p.Consumer, p.Key, micros(p.Until), ranOut)
	return err
}

// RetryRecord counts one failed attempt.
func (t *Executor) RetryRecord(ctx context.Context, r store.RetryRow) (store.RetryCount, error) {
	var attempts int
	var first string
	err := t.queryRow(ctx, `INSERT INTO seqbox_retries
		(consumer, source, id, partitionkey, attempts, first_error, last_error, first_at, last_at)
		VALUES ($1, $2, $3, $4, 1, $5, $5, $6, $6)
		ON CONFLICT (consumer, source, id) DO UPDATE SET attempts = seqbox_retries.attempts + 1,
			first_error = CASE WHEN seqbox_retries.attempts = 0 THEN excluded.first_error ELSE seqbox_retries.first_error END,
			last_error = excluded.last_error, last_at = excluded.last_at
		RETURNING attempts, first_error`,
		r.Consumer, r.Source, r.ID, r.PartitionKey, r.Error, micros(r.At)).Scan(&attempts, &first)
	return store.RetryCount{Attempts: attempts, FirstError: first}, err
}

// RetryClear forgets the attempts of an identity.
func (t *Executor) RetryClear(ctx context.Context, p store.MessageRef) error {
	consumer, source, id := p.Consumer, p.Source, p.ID
	_, err := t.exec(ctx, `DELETE FROM seqbox_retries WHERE consumer = $1 AND source = $2 AND id = $3`,
		consumer, source, id)
	return err
}

// ParkedRehold puts a parked message back as held until the given time, with
// detail saying why it waits now.
func (t *Executor) ParkedRehold(ctx context.Context, p store.ParkedReholdParams) error {
	seq, until, detail := p.Seq, p.Until, p.Detail
	_, err := t.exec(ctx, `UPDATE seqbox_parked SET reason = 'held', hold_until = $2, detail = $3 WHERE seq = $1`,
		seq, micros(until), detail)
	return err
}

// RetryOnKey returns the identity retrying on a key, if any, with the
// time of its last failed attempt or turn taken, and the payload hash its
// turn is bound to.
func (t *Executor) RetryOnKey(ctx context.Context, p store.KeyRef) (store.RetryRow, error) {
	consumer, key := p.Consumer, p.Key
	r := store.RetryRow{Consumer: consumer, PartitionKey: key}
	var last int64
	// A retry row whose identity has since settled in the inbox is stale
	// (a racing transaction applied or dead-lettered it): ignored. One
	// whose identity is parked (held or blocked) still holds the turn: it
	// was let out of the parked table and waits for its decision or its
	// backoff.
	err := t.queryRow(ctx, `SELECT r.source, r.id, r.last_error, r.last_at, r.payload_hash, r.businesskey FROM seqbox_retries r
		WHERE r.consumer = $1 AND r.partitionkey = $2 AND `+unsettled+`
		ORDER BY r.first_at LIMIT 1`, consumer, key).Scan(&r.Source, &r.ID, &r.Error, &last, &r.PayloadHash, &r.BusinessKey)
	if errors.Is(err, sql.ErrNoRows) {
		return r, store.ErrNotFound
	}
	r.At = time.UnixMicro(last).UTC()
	return r, err
}

// RetryRowsOnKeys lists the identities with a retry row on each key: one
// statement with an array on PostgreSQL, else chunks of keys.
func (t *Executor) RetryRowsOnKeys(ctx context.Context, p store.KeysRef) (map[string][]store.Identity, error) {
	out := map[string][]store.Identity{}
	keys := sortedUnique(p.Keys)
	if len(keys) == 0 {
		return out, nil
	}
	if t.arrays {
		return out, t.run(ctx, retryRowsArrays(p.Consumer, keys, out))
	}
	return out, eachChunk(len(keys), func(lo, hi int) error {
		rows, err := t.query(ctx, rowsText(`SELECT partitionkey, source, id FROM seqbox_retries
			WHERE consumer = $1 AND partitionkey IN ({{ROWS}})`, "$a", 1, hi-lo), append([]any{p.Consumer}, anys(keys[lo:hi])...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return readRetryIDs(rows, out)
	})
}

// retryRowsArrays is RetryRowsOnKeys' statement with an array of keys,
// read into out.
func retryRowsArrays(consumer string, keys []string, out map[string][]store.Identity) store.Statement {
	return store.Statement{Query: `SELECT partitionkey, source, id FROM seqbox_retries
			WHERE consumer = $1 AND partitionkey = ANY($2::text[])`, Args: []any{consumer, keys},
		Read: func(rows store.Rows) error { return readRetryIDs(rows, out) }}
}

// readRetryIDs reads (key, source, id) rows into out, by key.
func readRetryIDs(rows store.Rows, out map[string][]store.Identity) error {
	for rows.Next() {
		var key string
		var id store.Identity
		if err := rows.Scan(&key, &id.Source, &id.ID); err != nil {
			return err
		}
		out[key] = append(out[key], id)
	}
	return rows.Err()
}

// TurnListStale lists the unsettled retry rows last seen before p.Before.
func (t *Executor) TurnListStale(ctx context.Context, p store.TurnListStaleParams) ([]store.RetryRow, error) {
	rows, err := t.query(ctx, `SELECT r.source, r.id, r.partitionkey, r.last_error, r.last_at, r.payload_hash, r.businesskey FROM seqbox_retries r
		WHERE r.consumer = $1 AND r.last_at < $2 AND `+unsettled+`
		ORDER BY r.last_at LIMIT $3`, p.Consumer, micros(p.Before), p.Limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.RetryRow
	for rows.Next() {
		r := store.RetryRow{Consumer: p.Consumer}
		var last int64
		if err := rows.Scan(&r.Source, &r.ID, &r.PartitionKey, &r.Error, &last, &r.PayloadHash, &r.BusinessKey); err != nil {
			return nil, err
		}
		r.At = time.UnixMicro(last).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeadLetterInsert stores the original envelope.
func (t *Executor) DeadLetterInsert(ctx context.Context, d store.DeadLetter) (int64, error) {
	var seq int64
	line := fmt.Sprintf("%s: failed again after a redrive (%d more attempts): %s", d.DeadAt.UTC().Format(time.RFC3339Nano), d.Attempts,
		strings.ReplaceAll(d.Reason, "\n", " "))
	// The row a redrive took the message from ($11), or else the
	// identity's open row of the same payload.
	err := t.queryRow(ctx, `UPDATE seqbox_dlq SET attempts = attempts + $4, reason = $5, last_error = $6, dead_at = $7,
		redrives = redrives + 1, history = CASE WHEN history = '' THEN $8 ELSE history || $9 || $8 END
		WHERE seq = COALESCE(
			(SELECT seq FROM seqbox_dlq WHERE consumer = $1 AND seq = $11 AND state = 'open'),
			(SELECT MIN(seq) FROM seqbox_dlq WHERE consumer = $1 AND source = $2 AND id = $3 AND state = 'open'
				AND payload_hash = $10 AND $2 <> '' AND $3 <> ''))
		RETURNING seq`, d.Consumer, d.Source, d.ID, d.Attempts, d.Reason, d.LastError, micros(d.DeadAt), line, "\n", d.PayloadHash, d.Seq).Scan(&seq)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return seq, err
	}
	err = t.queryRow(ctx, `INSERT INTO seqbox_dlq
		(consumer, source, id, partitionkey, objectversion, payload_hash, envelope, reason, attempts,
		 first_error, last_error, dead_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING seq`,
		d.Consumer, d.Source, d.ID, d.PartitionKey, optInt(d.ObjectVersion), d.PayloadHash, d.Envelope, d.Reason,
		d.Attempts, d.FirstError, d.LastError, micros(d.DeadAt)).Scan(&seq)
	return seq, err
}

// DeadLetterResolve marks one open DLQ row resolved. Resolving a row that
// another transaction resolved first is store.ErrNotFound.
func (t *Executor) DeadLetterResolve(ctx context.Context, p store.DeadLetterResolveParams) error {
	consumer, seq, state, resolution, at := p.Consumer, p.Seq, p.State, p.Resolution, p.At
	res, err := t.exec(ctx, `UPDATE seqbox_dlq SET state = $3, resolution = $4, resolved_at = $5
		WHERE consumer = $1 AND seq = $2 AND state = 'open'`, consumer, seq, string(state), resolution, micros(at))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return errors.Join(err, store.ErrNotFound)
	}
	return nil
}

// AuditInsert records a non-applied outcome. A duplicate is counted on its
// inbox row instead (how often, and when last); a collision of a payload
// already audited for that identity adds no row.
func (t *Executor) AuditInsert(ctx context.Context, a store.AuditRow) error {
	st := auditStatement(a)
	_, err := t.exec(ctx, st.Query, st.Args...)
	return err
}

// auditStatement is AuditInsert's statement for a.
func auditStatement(a store.AuditRow) store.Statement {
	if a.Outcome == seqboxtype.Duplicate {
		return store.Statement{Query: `UPDATE seqbox_inbox SET duplicates = duplicates + 1, last_duplicate_at = $4
			WHERE consumer = $1 AND source = $2 AND id = $3`, Args: []any{a.Consumer, a.Source, a.ID, micros(a.At)}}
	}
	return store.Statement{Query: `INSERT INTO seqbox_audit
		(consumer, source, id, partitionkey, received_version, current_version, outcome, reason, next_action, at, payload_hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`,
		Args: []any{a.Consumer, a.Source, a.ID, a.PartitionKey, optInt(a.ReceivedVersion), optInt(a.CurrentVersion),
			a.Outcome, a.Reason, a.NextAction, micros(a.At), a.PayloadHash}}
}

// GapInsert records a known gap.
func (t *Executor) GapInsert(ctx context.Context, g store.Gap) error {
	_, err := t.exec(ctx, `INSERT INTO seqbox_gaps
		(consumer, partitionkey, from_version, to_version, decided_by, reason, at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		g.Consumer, g.Key, g.FromVersion, g.ToVersion, g.DecidedBy, g.Reason, micros(g.At))
	return err
}
