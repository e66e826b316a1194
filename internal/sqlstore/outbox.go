package sqlstore

import (
	"context"
	"database/sql"
	"strconv"

	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/seqbox/seqbox/store"
)

// The outbox's statements (package outbox): seqbox_outbox and
// seqbox_outbox_relay, migration 6, with the refusals' backoff since
// migration 8.

// OutboxInsert adds an event to the outbox.
//
// In a transaction on a database that runs write transactions side by
// side (PostgreSQL), the insert first takes its key's advisory lock until
// the transaction ends: a key's events are published in seq order, and
// without the lock a transaction that drew a higher seq could commit, and
// be published, before one that drew a lower seq and committed later
// (which the relay would then publish after it: a version older than the
// one downstream already applied). With it, a key's seqs commit in their
// order. SQLite runs one write transaction at a time and needs none.
func (t *Executor) OutboxInsert(ctx context.Context, e store.OutboxEvent) (int64, error) {
	var seq int64
	if t.tx != nil && !t.serialWriters {
		err := t.queryRow(ctx, `WITH k AS (SELECT pg_advisory_xact_lock(hashtextextended($2::text, `+strconv.FormatInt(dialect.OutboxKeyLockSeed, 10)+`)))
			INSERT INTO seqbox_outbox (origin, partitionkey, event_id, body, created_at)
			SELECT $1::text, $2::text, $3::text, $4::bytea, $5::bigint FROM k RETURNING seq`,
			e.Origin, e.PartitionKey, e.EventID, e.Body, micros(e.CreatedAt)).Scan(&seq)
		return seq, err
	}
	err := t.queryRow(ctx, `INSERT INTO seqbox_outbox (origin, partitionkey, event_id, body, created_at)
		VALUES ($1, $2, $3, $4, $5) RETURNING seq`, e.Origin, e.PartitionKey, e.EventID, e.Body, micros(e.CreatedAt)).Scan(&seq)
	return seq, err
}

// OutboxListReady reads the unpublished events no refused event of their
// key holds up.
func (t *Executor) OutboxListReady(ctx context.Context, p store.OutboxListReadyParams) ([]store.OutboxEvent, error) {
	rows, err := t.query(ctx, `SELECT o.seq, o.origin, o.partitionkey, o.event_id, o.body, o.created_at, o.attempts
		FROM seqbox_outbox o
		WHERE o.published_at IS NULL AND NOT EXISTS (SELECT 1 FROM seqbox_outbox h
			WHERE h.partitionkey = o.partitionkey AND h.published_at IS NULL
				AND h.next_attempt_at IS NOT NULL AND h.next_attempt_at > $1 AND h.seq <= o.seq)
		ORDER BY o.seq LIMIT $2`, micros(p.Now), p.Limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.OutboxEvent
	for rows.Next() {
		var e store.OutboxEvent
		var created sql.NullInt64
		if err := rows.Scan(&e.Seq, &e.Origin, &e.PartitionKey, &e.EventID, &e.Body, &created, &e.Attempts); err != nil {
			return nil, err
		}
		e.CreatedAt = fromMicros(created)
		out = append(out, e)
	}
	return out, rows.Err()
}

// OutboxMarkPublished marks events published, in chunks.
func (t *Executor) OutboxMarkPublished(ctx context.Context, p store.OutboxMarkPublishedParams) error {
	return eachChunk(len(p.Seqs), func(lo, hi int) error {
		args := []any{micros(p.At)}
		for _, s := range p.Seqs[lo:hi] {
			args = append(args, s)
		}
		_, err := t.exec(ctx, rowsText(`UPDATE seqbox_outbox SET published_at = $1 WHERE seq IN ({{ROWS}})`, "$a", 1, hi-lo), args...)
		return err
	})
}

// OutboxRefusalRecord counts a refusal.
func (t *Executor) OutboxRefusalRecord(ctx context.Context, p store.OutboxRefusalRecordParams) error {
	_, err := t.exec(ctx, `UPDATE seqbox_outbox SET attempts = attempts + 1, last_error = $1, next_attempt_at = $2 WHERE seq = $3`,
		p.Error, micros(p.NextAttempt), p.Seq)
	return err
}

// OutboxRefusalList lists the keys held up by a refused event.
func (t *Executor) OutboxRefusalList(ctx context.Context) ([]store.OutboxRefusal, error) {
	rows, err := t.query(ctx, `SELECT h.partitionkey, h.event_id, h.seq, h.attempts, h.last_error,
			h.created_at, h.next_attempt_at,
			(SELECT COUNT(*) FROM seqbox_outbox w WHERE w.partitionkey = h.partitionkey AND w.published_at IS NULL)
		FROM seqbox_outbox h
		WHERE h.published_at IS NULL AND h.next_attempt_at IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM seqbox_outbox e
				WHERE e.partitionkey = h.partitionkey AND e.published_at IS NULL AND e.seq < h.seq)
		ORDER BY h.seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.OutboxRefusal
	for rows.Next() {
		var f store.OutboxRefusal
		var since, next sql.NullInt64
		if err := rows.Scan(&f.PartitionKey, &f.EventID, &f.Seq, &f.Attempts, &f.LastError, &since, &next, &f.Unpublished); err != nil {
			return nil, err
		}
		f.Since, f.NextAttempt = fromMicros(since), fromMicros(next)
		out = append(out, f)
	}
	return out, rows.Err()
}

// OutboxBacklog reads the unpublished events' counts in one statement.
func (t *Executor) OutboxBacklog(ctx context.Context) (store.OutboxBacklog, error) {
	var b store.OutboxBacklog
	var oldest sql.NullInt64
	err := t.queryRow(ctx, `SELECT COUNT(*), MIN(created_at),
			COUNT(DISTINCT CASE WHEN next_attempt_at IS NOT NULL THEN partitionkey END),
			COALESCE(MAX(CASE WHEN next_attempt_at IS NOT NULL THEN attempts END), 0)
		FROM seqbox_outbox WHERE published_at IS NULL`).Scan(&b.Pending, &oldest, &b.RefusedKeys, &b.MaxAttempts)
	b.Oldest = fromMicros(oldest)
	return b, err
}

// OutboxLeaseTake takes or renews a relay lease.
func (t *Executor) OutboxLeaseTake(ctx context.Context, p store.OutboxLeaseParams) (bool, error) {
	return affectedOne(t.exec(ctx, `INSERT INTO seqbox_outbox_relay (name, owner, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
		WHERE seqbox_outbox_relay.owner = excluded.owner OR seqbox_outbox_relay.expires_at < $4`,
		p.Name, p.Owner, micros(p.Until), micros(p.Now)))
}

// OutboxLeaseRelease gives a relay lease up.
func (t *Executor) OutboxLeaseRelease(ctx context.Context, p store.OutboxLeaseParams) error {
	_, err := t.exec(ctx, `DELETE FROM seqbox_outbox_relay WHERE name = $1 AND owner = $2`, p.Name, p.Owner)
	return err
}

// OutboxPrune removes published events, lowest seq first: the oldest are
// at the front of the primary key, where the scan starts, and an
// unpublished one among them (its key refused) is passed over.
func (t *Executor) OutboxPrune(ctx context.Context, p store.OutboxPruneParams) (int64, error) {
	res, err := t.exec(ctx, `DELETE FROM seqbox_outbox WHERE seq IN (
		SELECT seq FROM seqbox_outbox WHERE published_at < $1 ORDER BY seq LIMIT $2)`, micros(p.Before), p.Limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
