package effects

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

const effectColumns = `consumer, source, id, action, idempotency_key, state, ref, last_error, calls, created_at, updated_at, uncertain_at, reconciled_at`

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanEffect(s scanner) (Effect, error) {
	var e Effect
	var created, updated int64
	var uncertain, reconciled sql.NullInt64
	err := s.Scan(&e.Consumer, &e.Source, &e.ID, &e.Action, &e.IdempotencyKey, &e.State, &e.Ref, &e.LastError,
		&e.Calls, &created, &updated, &uncertain, &reconciled)
	e.CreatedAt, e.UpdatedAt = time.UnixMicro(created).UTC(), time.UnixMicro(updated).UTC()
	e.UncertainAt, e.ReconciledAt = optionalTime(uncertain), optionalTime(reconciled)
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
	now := l.cfg.Now().UnixMicro()
	res, err := l.db.ExecContext(ctx, `INSERT INTO seqbox_effects (`+effectColumns+`)
		VALUES ($1, $2, $3, $4, $5, 'pending', '', '', 1, $6, $6, NULL, NULL) ON CONFLICT DO NOTHING`,
		e.Consumer, e.Source, e.ID, e.Action, e.IdempotencyKey, now)
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
	if to == Pending {
		calls = ", calls = calls + 1"
	}
	res, err := l.db.ExecContext(ctx, `UPDATE seqbox_effects SET state = $1, updated_at = $2`+calls+`
		WHERE idempotency_key = $3 AND state = $4`, to, l.cfg.Now().UnixMicro(), key, from)
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
