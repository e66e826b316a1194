package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox/store"
)

const dlqColumns = `seq, consumer, source, id, partitionkey, objectversion, payload_hash, envelope, reason, attempts,
	first_error, last_error, dead_at, state, resolution, resolved_at, redrives, history`

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(...any) error }

// collect reads every row of a query with scan, and closes the rows.
func collect[T any](rows *sql.Rows, err error, scan func(rowScanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanDLQ(row rowScanner) (store.DeadLetter, error) {
	var d store.DeadLetter
	var ver, resolved sql.NullInt64
	var dead int64
	var history string
	err := row.Scan(&d.Seq, &d.Consumer, &d.Source, &d.ID, &d.PartitionKey, &ver, &d.PayloadHash, &d.Envelope,
		&d.Reason, &d.Attempts, &d.FirstError, &d.LastError, &dead, &d.State, &d.Resolution, &resolved, &d.Redrives, &history)
	if history != "" {
		d.History = strings.Split(history, "\n")
	}
	d.ObjectVersion = ptrInt(ver)
	d.DeadAt = time.UnixMicro(dead).UTC()
	if resolved.Valid {
		r := fromMicros(resolved)
		d.ResolvedAt = &r
	}
	return d, err
}

func (o *Executor) DeadLetterList(ctx context.Context, p store.DeadLetterListParams) ([]store.DeadLetter, error) {
	if p.Limit < 0 || p.After < 0 {
		return nil, fmt.Errorf("dead letters: limit %d, after %d: want 0 or more", p.Limit, p.After)
	}
	q := `SELECT ` + dlqColumns + ` FROM seqbox_dlq
		WHERE consumer = $1 AND ($2 OR state = 'open') AND seq > $3`
	args := []any{p.Consumer, p.All, p.After}
	if p.Of != nil {
		q += ` AND source = $4 AND id = $5`
		args = append(args, p.Of.Source, p.Of.ID)
	}
	q += ` ORDER BY seq`
	if p.Limit > 0 {
		q += ` LIMIT $` + strconv.Itoa(len(args)+1)
		args = append(args, p.Limit)
	}
	rows, err := o.query(ctx, q, args...)
	return collect(rows, err, scanDLQ)
}

func (o *Executor) DeadLetterGet(ctx context.Context, p store.DeadLetterRef) (store.DeadLetter, error) {
	consumer, seq := p.Consumer, p.Seq
	d, err := scanDLQ(o.queryRow(ctx, `SELECT `+dlqColumns+` FROM seqbox_dlq
		WHERE consumer = $1 AND seq = $2`, consumer, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return d, store.ErrNotFound
	}
	return d, err
}

// keyViewColumns are a key view's columns: the key's row k and the
// aggregates p of its parked messages (keyViewParked).
const keyViewColumns = `k.consumer, k.partitionkey, k.version, k.blocked, k.blocked_source, k.blocked_id,
	k.blocked_reason, k.blocked_since, k.updated_at,
	COALESCE(p.held, 0), COALESCE(p.blocked, 0), COALESCE(p.n, 0), p.oldest, p.next, k.baseline`

// keyViewParked aggregates the consumer's parked messages by key ($2: one
// key, or every key when empty), once: a join grouped by every key
// grouped a million quiet keys that had nothing parked.
const keyViewParked = `(SELECT partitionkey,
		SUM(CASE WHEN reason = 'held' THEN 1 ELSE 0 END) AS held,
		SUM(CASE WHEN reason = 'blocked' THEN 1 ELSE 0 END) AS blocked,
		COUNT(*) AS n,
		MIN(CASE WHEN reason IN ('held', 'blocked') THEN parked_at END) AS oldest,
		MIN(CASE WHEN reason IN ('held', 'blocked') THEN objectversion END) AS next
	FROM seqbox_parked WHERE consumer = $1 AND ($2 = '' OR partitionkey = $2) GROUP BY partitionkey)`

// keyViewListQuery is the statement (and its arguments) of the key views
// of consumer: one key, or every key, or the stuck ones.
//
// Stuck: blocked, something held or blocked parked behind it, or its
// turn held by a message that failed and waits to be tried again (behind
// a gateway's message group its successors wait in the queue, not parked:
// nothing else would show the key). They are found from those rows (the
// blocked keys' partial index, migration 018; the parked messages; the
// retry rows), and only their keys are read: the console polls the list,
// and a consumer may have millions of quiet keys.
func keyViewListQuery(consumer, key string, stuck bool) (string, []any) {
	q := `SELECT ` + keyViewColumns + `
	FROM seqbox_keys k LEFT JOIN ` + keyViewParked + ` p ON p.partitionkey = k.partitionkey
	WHERE k.consumer = $1 AND ($2 = '' OR k.partitionkey = $2)`
	if stuck {
		q = `WITH stuck AS (SELECT partitionkey FROM seqbox_keys WHERE consumer = $1 AND blocked = 1
		UNION SELECT partitionkey FROM seqbox_parked WHERE consumer = $1 AND reason IN ('held', 'blocked')
		UNION SELECT partitionkey FROM seqbox_retries WHERE consumer = $1 AND attempts > 0)
	` + q + ` AND k.partitionkey IN (SELECT partitionkey FROM stuck)`
	}
	return q, []any{consumer, key}
}

func (o *Executor) keyViews(ctx context.Context, consumer, key string, stuck bool, keys ...string) ([]store.KeyView, error) {
	q, args := keyViewListQuery(consumer, key, stuck)
	if len(keys) > 0 {
		q, args = o.onlyKeys(q, args, keys)
	}
	rows, err := o.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.KeyView
	for rows.Next() {
		var v store.KeyView
		var ver, since, oldest, next, base sql.NullInt64
		var blocked int
		var updated int64
		if err := rows.Scan(&v.Consumer, &v.Key, &ver, &blocked, &v.BlockedSource, &v.BlockedID, &v.BlockedReason,
			&since, &updated, &v.Held, &v.BlockedCount, &v.Parked, &oldest, &next, &base); err != nil {
			return nil, err
		}
		v.Version, v.Baseline = ptrInt(ver), ptrInt(base)
		v.Blocked = blocked != 0
		v.BlockedSince = fromMicros(since)
		v.UpdatedAt = time.UnixMicro(updated).UTC()
		v.OldestParked = fromMicros(oldest)
		v.NextVersion = ptrInt(next)
		out = append(out, v)
	}
	// Sorted here, by bytes: an ORDER BY would follow the database's
	// collation, which differs between SQLite and an ICU PostgreSQL.
	slices.SortFunc(out, func(a, b store.KeyView) int { return strings.Compare(a.Key, b.Key) })
	return out, rows.Err()
}

func (o *Executor) KeyViewList(ctx context.Context, p store.KeyViewListParams) ([]store.KeyView, error) {
	consumer, stuck := p.Consumer, p.Stuck
	if p.Keys != nil && len(p.Keys) == 0 {
		return nil, nil
	}
	return o.keyViews(ctx, consumer, "", stuck, p.Keys...)
}

// onlyKeys narrows a key view statement (q, args) to keys: one array on
// PostgreSQL, one JSON array on SQLite.
func (o *Executor) onlyKeys(q string, args []any, keys []string) (string, []any) {
	n := "$" + strconv.Itoa(len(args)+1)
	if o.arrays {
		return q + ` AND k.partitionkey = ANY(` + n + `::text[])`, append(args, keys)
	}
	list, _ := json.Marshal(keys) // strings always marshal
	return q + ` AND k.partitionkey IN (SELECT value FROM json_each(` + n + `))`, append(args, string(list))
}

// KeyNameList names every key of a consumer, sorted by bytes here (an
// ORDER BY would follow the database's collation).
func (o *Executor) KeyNameList(ctx context.Context, p store.KeyNameListParams) ([]string, error) {
	rows, err := o.query(ctx, `SELECT partitionkey FROM seqbox_keys WHERE consumer = $1`, p.Consumer)
	names, err := collect(rows, err, func(r rowScanner) (string, error) {
		var name string
		return name, r.Scan(&name)
	})
	slices.Sort(names)
	return names, err
}

func (o *Executor) KeyViewGet(ctx context.Context, p store.KeyRef) (store.KeyView, error) {
	consumer, key := p.Consumer, p.Key
	if key == "" {
		return store.KeyView{}, store.ErrNotFound
	}
	vs, err := o.keyViews(ctx, consumer, key, false)
	if err != nil {
		return store.KeyView{}, err
	}
	if len(vs) == 0 {
		return store.KeyView{}, store.ErrNotFound
	}
	return vs[0], nil
}

func (o *Executor) ParkedList(ctx context.Context, p store.KeyRef) ([]store.Parked, error) {
	consumer, key := p.Consumer, p.Key
	rows, err := o.query(ctx, `SELECT `+parkedColumns+` FROM seqbox_parked
		WHERE consumer = $1 AND ($2 = '' OR partitionkey = $2) ORDER BY partitionkey, COALESCE(objectversion, -1), seq`,
		consumer, key)
	if err != nil {
		return nil, err
	}
	return scanParked(rows)
}

func (o *Executor) AuditList(ctx context.Context, p store.AuditListParams) ([]store.AuditRow, error) {
	consumer, key, limit := p.Consumer, p.Key, p.Limit
	rows, err := o.query(ctx, `SELECT seq, consumer, source, id, partitionkey, received_version,
		current_version, outcome, reason, next_action, at FROM (
			SELECT * FROM seqbox_audit WHERE consumer = $1 AND ($2 = '' OR partitionkey = $2)
			ORDER BY seq DESC LIMIT $3) recent ORDER BY seq`, consumer, key, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.AuditRow
	for rows.Next() {
		var a store.AuditRow
		var rv, cv sql.NullInt64
		var at int64
		if err := rows.Scan(&a.Seq, &a.Consumer, &a.Source, &a.ID, &a.PartitionKey, &rv, &cv, &a.Outcome,
			&a.Reason, &a.NextAction, &at); err != nil {
			return nil, err
		}
		a.ReceivedVersion, a.CurrentVersion = ptrInt(rv), ptrInt(cv)
		a.At = time.UnixMicro(at).UTC()
		out = append(out, a)
	}
	return out, rows.Err()
}

func (o *Executor) GapList(ctx context.Context, p store.KeyRef) ([]store.Gap, error) {
	consumer, key := p.Consumer, p.Key
	rows, err := o.query(ctx, `SELECT consumer, partitionkey, from_version, to_version, decided_by, reason, at
		FROM seqbox_gaps WHERE consumer = $1 AND ($2 = '' OR partitionkey = $2) ORDER BY seq`, consumer, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Gap
	for rows.Next() {
		var g store.Gap
		var at int64
		if err := rows.Scan(&g.Consumer, &g.Key, &g.FromVersion, &g.ToVersion, &g.DecidedBy, &g.Reason, &at); err != nil {
			return nil, err
		}
		g.At = time.UnixMicro(at).UTC()
		out = append(out, g)
	}
	return out, rows.Err()
}

func (o *Executor) Counts(ctx context.Context, consumer string) (store.Counts, error) {
	c, err := o.StuckCounts(ctx, consumer)
	if err != nil {
		return c, err
	}
	err = o.queryRow(ctx, `SELECT
		(SELECT COUNT(*) FROM seqbox_inbox WHERE consumer = $1 AND outcome <> 'rejected'),
		(SELECT COUNT(*) FROM seqbox_inbox WHERE consumer = $1 AND outcome = 'applied'),
		(SELECT COUNT(*) FROM seqbox_keys WHERE consumer = $1)`, consumer).Scan(&c.InboxRows, &c.Applied, &c.Keys)
	return c, err
}

// StuckCounts reads the parked messages, the open dead letters, the gaps
// and the retry rows, and the blocked keys through their partial index
// (migration 018): nothing that grows with the identities or the keys.
func (o *Executor) StuckCounts(ctx context.Context, consumer string) (store.Counts, error) {
	var c store.Counts
	var oldest, blockedSince sql.NullInt64
	err := o.queryRow(ctx, `SELECT
		(SELECT COUNT(*) FROM seqbox_parked WHERE consumer = $1),
		(SELECT COUNT(*) FROM seqbox_parked WHERE consumer = $1 AND reason = 'held'),
		(SELECT COUNT(*) FROM seqbox_parked WHERE consumer = $1 AND reason = 'blocked'),
		(SELECT COUNT(*) FROM seqbox_dlq WHERE consumer = $1 AND state = 'open'),
		(SELECT COUNT(*) FROM seqbox_keys WHERE consumer = $1 AND blocked = 1),
		(SELECT COUNT(*) FROM seqbox_gaps WHERE consumer = $1),
		(SELECT MIN(parked_at) FROM seqbox_parked WHERE consumer = $1 AND reason IN ('held', 'blocked')),
		(SELECT MIN(blocked_since) FROM seqbox_keys WHERE consumer = $1 AND blocked = 1),
		(SELECT COUNT(DISTINCT partitionkey) FROM seqbox_retries WHERE consumer = $1 AND attempts > 0 AND partitionkey <> '')`, consumer).
		Scan(&c.Parked, &c.Held, &c.Blocked, &c.DeadLetters, &c.BlockedKeys, &c.Gaps, &oldest, &blockedSince, &c.RetryingKeys)
	// A key is stuck since the earlier of its block and its oldest held
	// or blocked message (ops.KeyReport.Since): a hold that became a
	// block keeps its start, and a key blocked with nothing parked
	// behind it counts too.
	c.OldestStuck = fromMicros(oldest)
	if b := fromMicros(blockedSince); !b.IsZero() && (c.OldestStuck.IsZero() || b.Before(c.OldestStuck)) {
		c.OldestStuck = b
	}
	return c, err
}

func (o *Executor) ParkedListDue(ctx context.Context, p store.ParkedListDueParams) ([]store.Parked, error) {
	consumer, now := p.Consumer, p.Now
	rows, err := o.query(ctx, `SELECT `+parkedColumns+` FROM seqbox_parked p
		WHERE consumer = $1 AND reason = 'held' AND hold_until IS NOT NULL AND hold_until <= $2
		AND NOT EXISTS (SELECT 1 FROM seqbox_parked q WHERE q.consumer = p.consumer
			AND q.partitionkey = p.partitionkey AND q.reason = 'held'
			AND (COALESCE(q.objectversion, -1) < COALESCE(p.objectversion, -1)
				OR (COALESCE(q.objectversion, -1) = COALESCE(p.objectversion, -1) AND q.seq < p.seq)))
		ORDER BY parked_at, seq`, consumer, micros(now))
	if err != nil {
		return nil, err
	}
	return scanParked(rows)
}

func (o *Executor) KeyListBlockedBefore(ctx context.Context, p store.KeyListBlockedBeforeParams) ([]store.KeyState, error) {
	consumer, before := p.Consumer, p.Before
	rows, err := o.query(ctx, `SELECT `+keyColumns+` FROM seqbox_keys
		WHERE consumer = $1 AND blocked = 1 AND blocked_since < $2 ORDER BY blocked_since`, consumer, micros(before))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.KeyState
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

func (o *Executor) InboxPurge(ctx context.Context, p store.InboxPurgeParams) (store.InboxPurgeResult, error) {
	var res store.InboxPurgeResult
	args := []any{p.Consumer, micros(p.Now), p.Limit, purgeFrom(p.From)}
	// Attempts of an identity that settled are stale; they would come back
	// to life (hold the key) once the identity is purged. Driven from the
	// (small) retries table, so its cost does not grow with the inbox rows
	// still to purge.
	if _, err := o.exec(ctx, `DELETE FROM seqbox_retries WHERE consumer = $1 AND (source, id) IN (
		SELECT r.source, r.id FROM seqbox_retries r WHERE r.consumer = $1 AND EXISTS (
			SELECT 1 FROM seqbox_inbox i WHERE i.consumer = r.consumer AND i.source = r.source AND i.id = r.id
			AND i.retention_until < $2) LIMIT $3)`, args[:3]...); err != nil {
		return res, err
	}
	// What else is kept of the batch's identities goes before them, each
	// table through an index that begins with the identity: its decision
	// and any claim on it, its ledger calls that ended (an uncertain or
	// pending one is an operator's to resolve, and stays), its business
	// key's claim, its audit rows and its resolved dead letters (an open
	// one may block its key). The identities go last: a purge stopped
	// between these statements finds the same batch the next time.
	if o.group != nil {
		return o.purgeGrouped(ctx, args)
	}
	if o.serialWriters {
		return o.purgeDeletes(ctx, args)
	}
	// One transaction for the batch: one commit (one WAL flush on
	// PostgreSQL) where a statement each took seven.
	err := o.inTx(ctx, func(t *Executor) error {
		var err error
		res, err = t.purgeDeletes(ctx, args)
		return err
	})
	if err != nil {
		return store.InboxPurgeResult{}, err
	}
	return res, nil
}

// purgeDeletes runs a purge batch's deletes: the dependents, then the
// identities, whose latest retention end it reports.
func (t *Executor) purgeDeletes(ctx context.Context, args []any) (store.InboxPurgeResult, error) {
	var res store.InboxPurgeResult
	for _, dep := range purgeDependents {
		if _, err := t.exec(ctx, dep, args...); err != nil {
			return res, err
		}
	}
	rows, err := t.query(ctx, `DELETE FROM seqbox_inbox WHERE consumer = $1 AND (source, id) IN (
		SELECT i.source, i.id `+purgeBatch+`) RETURNING retention_until`, args...)
	if err != nil {
		return res, err
	}
	defer rows.Close()
	var last int64
	for rows.Next() {
		var until int64
		if err := rows.Scan(&until); err != nil {
			return res, err
		}
		res.Removed++
		last = max(last, until)
	}
	if err := rows.Err(); err != nil {
		return res, err
	}
	if res.Removed > 0 {
		res.Last = time.UnixMicro(last)
	}
	return res, nil
}

// purgeGrouped is InboxPurge's deletes on a store with one writer: one
// job of the group's commit, one fsync for the batch where a statement
// each took seven, and all of the batch's rows or none. The batch's
// latest retention end is read first; the job's last statement, the
// identities', counts what it removed.
func (o *Executor) purgeGrouped(ctx context.Context, args []any) (store.InboxPurgeResult, error) {
	var res store.InboxPurgeResult
	var last sql.NullInt64
	if err := o.queryRow(ctx, `SELECT MAX(b.retention_until) FROM (SELECT i.retention_until `+purgeBatch+`) b`, args...).Scan(&last); err != nil {
		return res, err
	}
	if !last.Valid {
		return res, nil // nothing to purge
	}
	then := make([]groupStmt, 0, len(purgeDependents))
	for _, dep := range purgeDependents[1:] {
		then = append(then, groupStmt{q: dep, args: args})
	}
	then = append(then, groupStmt{q: `DELETE FROM seqbox_inbox WHERE consumer = $1 AND (source, id) IN (SELECT i.source, i.id ` + purgeBatch + `)`,
		args: args, check: func(r sql.Result) error {
			n, err := r.RowsAffected()
			res.Removed = n
			return err
		}})
	if _, err := o.group.exec(ctx, purgeDependents[0], args, then...); err != nil {
		return store.InboxPurgeResult{}, err
	}
	if res.Removed > 0 {
		res.Last = time.UnixMicro(last.Int64)
	}
	return res, nil
}

// purgeBatch is the FROM clause of one purge batch: the consumer's ($1)
// identities whose retention ended before $2, from $4 on, oldest first,
// at most $3, through the retention index. Held and blocked identities
// stay, and so does one that settled without applying while a call of it
// took effect or may have, while the ledger keeps that call: it is what
// keeps another event of its business key from asking for the effect
// again (BusinessKeyTouched).
const purgeBatch = `FROM seqbox_inbox i WHERE i.consumer = $1 AND i.retention_until < $2 AND i.retention_until >= $4
	AND i.outcome NOT IN ('held', 'blocked')
	AND NOT (i.businesskey <> '' AND i.outcome IN ('dead_lettered', 'stale', 'expired') AND EXISTS (
		SELECT 1 FROM seqbox_effects e WHERE e.consumer = i.consumer AND e.source = i.source AND e.id = i.id
		AND e.state IN ('pending', 'uncertain', 'succeeded')))
	ORDER BY i.retention_until LIMIT $3`

// purgeDependents delete, before a purge batch's identities, the rows of
// other tables kept about them.
var purgeDependents = []string{
	`DELETE FROM seqbox_decisions WHERE consumer = $1 AND (source, id) IN (SELECT i.source, i.id ` + purgeBatch + `)`,
	`DELETE FROM seqbox_decision_claims WHERE consumer = $1 AND (source, id) IN (SELECT i.source, i.id ` + purgeBatch + `)`,
	`DELETE FROM seqbox_effects WHERE consumer = $1 AND state IN ('succeeded', 'failed')
		AND (source, id) IN (SELECT i.source, i.id ` + purgeBatch + `)`,
	`DELETE FROM seqbox_business_keys WHERE consumer = $1
		AND (businesskey, source, id) IN (SELECT i.businesskey, i.source, i.id ` + purgeBatch + `)`,
	`DELETE FROM seqbox_audit WHERE consumer = $1 AND (source, id) IN (SELECT i.source, i.id ` + purgeBatch + `)`,
	`DELETE FROM seqbox_dlq WHERE consumer = $1 AND state <> 'open' AND (source, id) IN (SELECT i.source, i.id ` + purgeBatch + `)`,
}

// purgeFrom is InboxPurgeParams.From in the inbox's microseconds; the
// zero time starts at the oldest identity.
func purgeFrom(from time.Time) int64 {
	if from.IsZero() {
		return math.MinInt64
	}
	return micros(from)
}
