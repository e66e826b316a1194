package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/seqbox/seqbox/store"
)

// control holds consumer registrations and operator requests.
type control struct{ db *sql.DB }

var _ store.Control = control{}

// Control returns the registrations and operator requests.
func (s *Store) Control() store.Control { return control{db: s.db} }

func (c control) ConsumerRegister(ctx context.Context, r store.Registration) error {
	return register(ctx, c.db, r)
}

func (c control) ConsumerRegisterTx(ctx context.Context, tx *sql.Tx, r store.Registration) error {
	return register(ctx, tx, r)
}

func register(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, r store.Registration) error {
	_, err := db.ExecContext(ctx, `INSERT INTO seqbox_consumers (consumer, handler_kind, policies, process, started_at, heartbeat_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (consumer) DO UPDATE SET handler_kind = excluded.handler_kind, policies = excluded.policies,
			process = excluded.process, started_at = excluded.started_at,
			heartbeat_at = COALESCE(excluded.heartbeat_at, seqbox_consumers.heartbeat_at)`,
		r.Consumer, r.HandlerKind, string(r.Policies), r.Process, micros(r.StartedAt), zeroNullMicros(r.HeartbeatAt))
	return StorageError("register consumer", err)
}

func (c control) ConsumerHeartbeat(ctx context.Context, consumer string, at time.Time) error {
	_, err := c.db.ExecContext(ctx, `UPDATE seqbox_consumers SET heartbeat_at = $2 WHERE consumer = $1`, consumer, micros(at))
	return StorageError("heartbeat", err)
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

func (c control) ConsumerList(ctx context.Context) ([]store.Registration, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT `+registrationColumns+` FROM seqbox_consumers`)
	out, err := collect(rows, err, scanRegistration)
	// Sorted here, by bytes, so every store and collation agrees.
	slices.SortFunc(out, func(a, b store.Registration) int { return strings.Compare(a.Consumer, b.Consumer) })
	return out, err
}

func (c control) ConsumerGet(ctx context.Context, consumer string) (store.Registration, error) {
	r, err := scanRegistration(c.db.QueryRowContext(ctx, `SELECT `+registrationColumns+` FROM seqbox_consumers WHERE consumer = $1`, consumer))
	if errors.Is(err, sql.ErrNoRows) {
		return r, store.ErrNotFound
	}
	return r, err
}

func (c control) RequestInsert(ctx context.Context, r store.OperatorRequest) (int64, error) {
	var seq int64
	err := c.db.QueryRowContext(ctx, `INSERT INTO seqbox_requests (consumer, action, target, requested_by, reason, requested_at, state)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING seq`,
		r.Consumer, r.Action, r.Target, r.RequestedBy, r.Reason, micros(r.RequestedAt), string(store.RequestPending)).Scan(&seq)
	return seq, StorageError("record operator request", err)
}

const requestColumns = `seq, consumer, action, target, requested_by, reason, requested_at, state, taken_by, taken_at,
	result, error, done_at`

func scanRequest(row rowScanner) (store.OperatorRequest, error) {
	var r store.OperatorRequest
	var requested int64
	var taken, done sql.NullInt64
	var state, result string
	err := row.Scan(&r.Seq, &r.Consumer, &r.Action, &r.Target, &r.RequestedBy, &r.Reason, &requested, &state,
		&r.TakenBy, &taken, &result, &r.Error, &done)
	r.RequestedAt = time.UnixMicro(requested).UTC()
	r.State = store.RequestState(state)
	r.TakenAt, r.DoneAt = fromMicros(taken), fromMicros(done)
	if result != "" {
		r.Result = []byte(result)
	}
	return r, err
}

func (c control) RequestListPending(ctx context.Context, consumer string) ([]store.OperatorRequest, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT `+requestColumns+` FROM seqbox_requests
		WHERE consumer = $1 AND state = $2 ORDER BY seq`, consumer, string(store.RequestPending))
	return collect(rows, err, scanRequest)
}

func (c control) RequestGet(ctx context.Context, seq int64) (store.OperatorRequest, error) {
	r, err := scanRequest(c.db.QueryRowContext(ctx, `SELECT `+requestColumns+` FROM seqbox_requests WHERE seq = $1`, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return r, store.ErrNotFound
	}
	return r, err
}

// moveRequest changes a request's state from one to another; false means
// it was not in the from state.
func (c control) moveRequest(ctx context.Context, query string, args ...any) (bool, error) {
	res, err := c.db.ExecContext(ctx, query, args...)
	if err != nil {
		return false, StorageError("update operator request", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (c control) RequestClaim(ctx context.Context, seq int64, taker string, at time.Time) (bool, error) {
	return c.moveRequest(ctx, `UPDATE seqbox_requests SET state = $2, taken_by = $3, taken_at = $4
		WHERE seq = $1 AND state = $5`, seq, string(store.RequestRunning), taker, micros(at), string(store.RequestPending))
}

func (c control) RequestFinish(ctx context.Context, seq int64, state store.RequestState, result []byte, errText string, at time.Time) error {
	ok, err := c.moveRequest(ctx, `UPDATE seqbox_requests SET state = $2, result = $3, error = $4, done_at = $5
		WHERE seq = $1 AND state = $6`, seq, string(state), string(result), errText, micros(at), string(store.RequestRunning))
	if err == nil && !ok {
		err = store.ErrNotFound
	}
	return err
}

func (c control) RequestCancel(ctx context.Context, seq int64, why string, at time.Time) (bool, error) {
	return c.moveRequest(ctx, `UPDATE seqbox_requests SET state = $2, error = $3, done_at = $4
		WHERE seq = $1 AND state = $5`, seq, string(store.RequestCancelled), why, micros(at), string(store.RequestPending))
}
