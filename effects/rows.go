package effects

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/heartbeat"
)

const effectColumns = `consumer, source, id, action, idempotency_key, state, ref, last_error, calls, created_at, updated_at, uncertain_at, reconciled_at, lease_until`

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanEffect(s scanner) (Effect, error) {
	var e Effect
	var created, updated int64
	var uncertain, reconciled, lease sql.NullInt64
	err := s.Scan(&e.Consumer, &e.Source, &e.ID, &e.Action, &e.IdempotencyKey, &e.State, &e.Ref, &e.LastError,
		&e.Calls, &created, &updated, &uncertain, &reconciled, &lease)
	e.CreatedAt, e.UpdatedAt = time.UnixMicro(created).UTC(), time.UnixMicro(updated).UTC()
	e.UncertainAt, e.ReconciledAt = optionalTime(uncertain), optionalTime(reconciled)
	if e.State == Pending {
		e.LeaseUntil = optionalTime(lease)
	}
	return e, err
}

func optionalTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.UnixMicro(v.Int64).UTC()
	return &t
}

// get reads the row of an idempotency key.
func (l *Ledger) get(ctx context.Context, key string) (Effect, bool, error) {
	e, err := scanEffect(l.db.QueryRowContext(ctx, `SELECT `+effectColumns+` FROM seqbox_effects WHERE idempotency_key = $1`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return Effect{}, false, nil
	}
	if err != nil {
		return Effect{}, false, fmt.Errorf("effects: read %s: %w", key, err)
	}
	return e, true, nil
}

// insertPending commits a new pending row; false when the row exists.
func (l *Ledger) insertPending(ctx context.Context, e Effect) (bool, error) {
	now := l.cfg.Now()
	res, err := l.db.ExecContext(ctx, `INSERT INTO seqbox_effects (`+effectColumns+`)
		VALUES ($1, $2, $3, $4, $5, 'pending', '', '', 1, $6, $6, NULL, NULL, $7) ON CONFLICT DO NOTHING`,
		e.Consumer, e.Source, e.ID, e.Action, e.IdempotencyKey, now.UnixMicro(), now.Add(l.lease()).UnixMicro())
	if err != nil {
		return false, fmt.Errorf("effects: record %s pending: %w", e.IdempotencyKey, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// transition moves a row from one state to another; false when it was
// not in from (another member moved it first). Moving to pending counts
// a call.
func (l *Ledger) transition(ctx context.Context, key string, from, to State) (bool, error) {
	calls := ""
	now := l.cfg.Now()
	args := []any{to, now.UnixMicro(), key, from}
	if to == Pending {
		args = append(args, now.Add(l.lease()).UnixMicro())
		calls = ", calls = calls + 1, lease_until = $5"
	}
	res, err := l.db.ExecContext(ctx, `UPDATE seqbox_effects SET state = $1, updated_at = $2`+calls+`
		WHERE idempotency_key = $3 AND state = $4`, args...)
	if err != nil {
		return false, fmt.Errorf("effects: move %s from %s to %s: %w", key, from, to, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// settle records a call's outcome on a row in one of the states from; a
// row that moved elsewhere meanwhile (succeeded through another member)
// is left alone. The first time a row turns uncertain is kept.
func (l *Ledger) settle(ctx context.Context, key string, to State, ref, lastError string, from ...State) error {
	return l.update(ctx, key, to, ref, lastError, false, from...)
}

// update is settle; reconciled also records that a reconciliation
// answered.
func (l *Ledger) update(ctx context.Context, key string, to State, ref, lastError string, reconciled bool, from ...State) error {
	set := ""
	if to == Uncertain {
		set += ", uncertain_at = COALESCE(uncertain_at, $4)"
	}
	if reconciled {
		set += ", reconciled_at = $4"
	}
	args := []any{to, ref, lastError, l.cfg.Now().UnixMicro(), key}
	marks := make([]string, len(from))
	for i, s := range from {
		args = append(args, s)
		marks[i] = fmt.Sprintf("$%d", len(args))
	}
	_, err := l.db.ExecContext(ctx, `UPDATE seqbox_effects SET state = $1, ref = $2, last_error = $3, updated_at = $4`+set+`
		WHERE idempotency_key = $5 AND state IN (`+strings.Join(marks, ", ")+`)`, args...)
	if err != nil {
		return fmt.Errorf("effects: record %s %s: %w", key, to, err)
	}
	return nil
}

// lease is how long a pending row's caller vouches for it without a
// heartbeat: three heartbeats.
func (l *Ledger) lease() time.Duration { return 3 * l.cfg.Heartbeat }

// heartbeat renews the lease of key's pending row every Heartbeat while
// its call runs, until stop is called.
func (l *Ledger) heartbeat(ctx context.Context, key string) (stop func()) {
	return heartbeat.Start(ctx, l.cfg.Heartbeat, func(ctx context.Context) {
		_, _ = l.db.ExecContext(ctx, `UPDATE seqbox_effects SET lease_until = $1 WHERE idempotency_key = $2 AND state = 'pending'`,
			l.cfg.Now().Add(l.lease()).UnixMicro(), key)
	})
}

// live reports whether a pending row's caller still vouches for it.
func (l *Ledger) live(e Effect) bool {
	return e.State == Pending && e.LeaseUntil != nil && e.LeaseUntil.After(l.cfg.Now())
}
