package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// ConsumerRegister records or refreshes a registration; the last writer
// wins.
func (c *Executor) ConsumerRegister(ctx context.Context, r store.Registration) error {
	_, err := c.exec(ctx, `INSERT INTO seqbox_consumers (consumer, handler_kind, policies, process, started_at, heartbeat_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (consumer) DO UPDATE SET handler_kind = excluded.handler_kind, policies = excluded.policies,
			process = excluded.process, started_at = excluded.started_at,
			heartbeat_at = COALESCE(excluded.heartbeat_at, seqbox_consumers.heartbeat_at)`,
		r.Consumer, r.HandlerKind, string(r.Policies), r.Process, micros(r.StartedAt), zeroNullMicros(r.HeartbeatAt))
	return c.storageError("register consumer", err)
}

func (c *Executor) ConsumerHeartbeat(ctx context.Context, p store.ConsumerHeartbeatParams) error {
	consumer, at := p.Consumer, p.At
	_, err := c.exec(ctx, `UPDATE seqbox_consumers SET heartbeat_at = $2 WHERE consumer = $1`, consumer, micros(at))
	return c.storageError("heartbeat", err)
}

const registrationColumns = `consumer, handler_kind, policies, process, started_at, heartbeat_at`

func scanRegistration(row rowScanner) (store.Registration, error) {
	var r store.Registration
	var policies string
	var started int64
	var beat sql.NullInt64
	err := row.Scan(&r.Consumer, &r.HandlerKind, &policies, &r.Process, &started, &beat)
	r.Policies = []byte(policies)
	r.StartedAt = time.UnixMicro(started).UTC()
	r.HeartbeatAt = fromMicros(beat)
	return r, err
}

func (c *Executor) ConsumerList(ctx context.Context) ([]store.Registration, error) {
	rows, err := c.query(ctx, `SELECT `+registrationColumns+` FROM seqbox_consumers`)
	out, err := collect(rows, err, scanRegistration)
	// Sorted here, by bytes, so every store and collation agrees.
	slices.SortFunc(out, func(a, b store.Registration) int { return strings.Compare(a.Consumer, b.Consumer) })
	return out, err
}

func (c *Executor) ConsumerGet(ctx context.Context, consumer string) (store.Registration, error) {
	r, err := scanRegistration(c.queryRow(ctx, `SELECT `+registrationColumns+` FROM seqbox_consumers WHERE consumer = $1`, consumer))
	if errors.Is(err, sql.ErrNoRows) {
		return r, store.ErrNotFound
	}
	return r, err
}

func (c *Executor) RequestInsert(ctx context.Context, r store.OperatorRequest) (int64, error) {
	var seq int64
	err := c.queryRow(ctx, `INSERT INTO seqbox_requests (consumer, action, target, requested_by, reason, requested_at, state)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING seq`,
		r.Consumer, r.Action, r.Target, r.RequestedBy, r.Reason, micros(r.RequestedAt), string(seqboxtype.RequestPending)).Scan(&seq)
	return seq, c.storageError("record operator request", err)
}

const requestColumns = `seq, consumer, action, target, requested_by, reason, requested_at, state, taken_by, taken_at,
	result, error, done_at, alive_at`

func scanRequest(row rowScanner) (store.OperatorRequest, error) {
	var r store.OperatorRequest
	var requested int64
	var taken, done, alive sql.NullInt64
	var result string
	err := row.Scan(&r.Seq, &r.Consumer, &r.Action, &r.Target, &r.RequestedBy, &r.Reason, &requested, &r.State,
		&r.TakenBy, &taken, &result, &r.Error, &done, &alive)
	r.RequestedAt = time.UnixMicro(requested).UTC()
	r.TakenAt, r.DoneAt, r.AliveAt = fromMicros(taken), fromMicros(done), fromMicros(alive)
	if result != "" {
		r.Result = []byte(result)
	}
	return r, err
}

func (c *Executor) RequestListPending(ctx context.Context, consumer string) ([]store.OperatorRequest, error) {
	rows, err := c.query(ctx, `SELECT `+requestColumns+` FROM seqbox_requests
		WHERE consumer = $1 AND state = $2 ORDER BY seq`, consumer, string(seqboxtype.RequestPending))
	return collect(rows, err, scanRequest)
}

func (c *Executor) RequestGet(ctx context.Context, seq int64) (store.OperatorRequest, error) {
	r, err := scanRequest(c.queryRow(ctx, `SELECT `+requestColumns+` FROM seqbox_requests WHERE seq = $1`, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return r, store.ErrNotFound
	}
	return r, err
}

// moveRequest changes a request's state from one to another; false means
// it was not in the from state.
func (c *Executor) moveRequest(ctx context.Context, query string, args ...any) (bool, error) {
	res, err := c.exec(ctx, query, args...)
	if err != nil {
		return false, c.storageError("update operator request", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (c *Executor) RequestClaim(ctx context.Context, p store.RequestClaimParams) (bool, error) {
	seq, taker, at := p.Seq, p.Taker, p.At
	return c.moveRequest(ctx, `UPDATE seqbox_requests SET state = $2, taken_by = $3, taken_at = $4, alive_at = $4
		WHERE seq = $1 AND state = $5`, seq, string(seqboxtype.RequestRunning), taker, micros(at), string(seqboxtype.RequestPending))
}

func (c *Executor) RequestAlive(ctx context.Context, p store.RequestAliveParams) (bool, error) {
	return c.moveRequest(ctx, `UPDATE seqbox_requests SET alive_at = $3 WHERE seq = $1 AND state = $2 AND taken_by = $4`,
		p.Seq, string(seqboxtype.RequestRunning), micros(p.At), p.Taker)
}

func (c *Executor) RequestListRunning(ctx context.Context, consumer string) ([]store.OperatorRequest, error) {
	rows, err := c.query(ctx, `SELECT `+requestColumns+` FROM seqbox_requests
		WHERE consumer = $1 AND state = $2 ORDER BY seq`, consumer, string(seqboxtype.RequestRunning))
	return collect(rows, err, scanRequest)
}

func (c *Executor) RequestAbandon(ctx context.Context, p store.RequestAbandonParams) (bool, error) {
	return c.moveRequest(ctx, `UPDATE seqbox_requests SET state = $3, done_at = $5,
		error = 'abandoned: its taker ' || taken_by || ' showed no sign of life in ' || CAST($6 AS TEXT) ||
			' (killed or frozen while it ran the request), so it may have stopped partway; '
			|| 'see what the message reached (seqbox inbox show, seqbox dlq list), then run the command again'
		WHERE seq = $1 AND state = $2 AND alive_at = $4`, p.Seq, string(seqboxtype.RequestRunning), string(seqboxtype.RequestFailed),
		micros(p.AliveAt), micros(p.At), p.Silent.Round(time.Second).String())
}

func (c *Executor) RequestFinish(ctx context.Context, p store.RequestFinishParams) error {
	ok, err := c.moveRequest(ctx, `UPDATE seqbox_requests SET state = $2, result = $3, error = $4, done_at = $5
		WHERE seq = $1 AND state = $6`, p.Seq, string(p.State), string(p.Result), p.Error, micros(p.At), string(seqboxtype.RequestRunning))
	if err == nil && !ok {
		err = store.ErrNotFound
	}
	return err
}

func (c *Executor) RequestCancel(ctx context.Context, p store.RequestCancelParams) (bool, error) {
	seq, why, at := p.Seq, p.Why, p.At
	return c.moveRequest(ctx, `UPDATE seqbox_requests SET state = $2, error = $3, done_at = $4
		WHERE seq = $1 AND state = $5`, seq, string(seqboxtype.RequestCancelled), why, micros(at), string(seqboxtype.RequestPending))
}
