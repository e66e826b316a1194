package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// The effects ledger's statements (package effects): seqbox_effects,
// migration 6, with lease_until since migration 8.

const effectColumns = `consumer, source, id, action, idempotency_key, state, ref, last_error, calls, created_at, updated_at, uncertain_at, reconciled_at, lease_until`

// scanEffect reads one row of effectColumns.
func scanEffect(s rowScanner) (store.EffectRow, error) {
	var e store.EffectRow
	var created, updated int64
	var uncertain, reconciled, lease sql.NullInt64
	err := s.Scan(&e.Consumer, &e.Source, &e.ID, &e.Action, &e.IdempotencyKey, &e.State, &e.Ref, &e.LastError,
		&e.Calls, &created, &updated, &uncertain, &reconciled, &lease)
	e.CreatedAt, e.UpdatedAt = time.UnixMicro(created).UTC(), time.UnixMicro(updated).UTC()
	e.UncertainAt, e.ReconciledAt, e.LeaseUntil = optTime(uncertain), optTime(reconciled), optTime(lease)
	return e, err
}

// optTime is a nullable micros column as a time, nil for NULL.
func optTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v)
	return &t
}

// openCall is the predicate of seqbox_effects_open_key and
// seqbox_effects_open_state (migration 20), the indexes of the open calls'
// keys and states: a lookup by either states it word for word, so that
// SQLite, which proves a partial index's use by its terms, takes the
// index.
const openCall = `state <> 'succeeded'`

// EffectGet reads the row of an idempotency key: an open call's through
// the index of open keys, a succeeded one's by a scan of the ledger.
func (t *Executor) EffectGet(ctx context.Context, key string) (store.EffectRow, error) {
	e, err := scanEffect(t.queryRow(ctx, `SELECT `+effectColumns+` FROM seqbox_effects WHERE idempotency_key = $1 AND `+openCall, key))
	if errors.Is(err, sql.ErrNoRows) {
		e, err = scanEffect(t.queryRow(ctx, `SELECT `+effectColumns+` FROM seqbox_effects WHERE idempotency_key = $1`, key))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.EffectRow{}, store.ErrNotFound
	}
	return e, err
}

// EffectGetCall reads the row of an identity and action.
func (t *Executor) EffectGetCall(ctx context.Context, c store.EffectCall) (store.EffectRow, error) {
	e, err := scanEffect(t.queryRow(ctx, `SELECT `+effectColumns+` FROM seqbox_effects
		WHERE consumer = $1 AND source = $2 AND id = $3 AND action = $4`, c.Consumer, c.Source, c.ID, c.Action))
	if errors.Is(err, sql.ErrNoRows) {
		return store.EffectRow{}, store.ErrNotFound
	}
	return e, err
}

// whereCall is the WHERE of a write to the row of call c whose key is
// key, in one of the states from, its placeholders numbered after args'
// (which it extends). The primary key finds the row, and the key must be
// the row's. A write that names no call finds its row by key: through
// the index of open keys when from holds no succeeded state, by a scan
// otherwise.
func whereCall(c store.EffectCall, key string, from []seqboxtype.Effect, args []any, off int) (string, []any) {
	mark := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", off+len(args))
	}
	var terms []string
	named := c.Named()
	if named {
		terms = append(terms, "consumer = "+mark(c.Consumer), "source = "+mark(c.Source), "id = "+mark(c.ID), "action = "+mark(c.Action))
	}
	terms = append(terms, "idempotency_key = "+mark(key))
	if !named && !slices.Contains(from, seqboxtype.EffectSucceeded) {
		terms = append(terms, openCall)
	}
	marks := make([]string, len(from))
	for i, s := range from {
		marks[i] = mark(s)
	}
	terms = append(terms, "state IN ("+strings.Join(marks, ", ")+")")
	return strings.Join(terms, " AND "), args
}

// EffectInsertPending inserts a pending row; false when one exists.
func (t *Executor) EffectInsertPending(ctx context.Context, p store.EffectInsertPendingParams) (bool, error) {
	n, err := t.single(ctx, store.Statement{Query: `INSERT INTO seqbox_effects (` + effectColumns + `)
		VALUES ($1, $2, $3, $4, $5, 'pending', '', '', 1, $6, $6, NULL, NULL, $7) ON CONFLICT DO NOTHING`,
		Args: []any{p.Consumer, p.Source, p.ID, p.Action, p.IdempotencyKey, micros(p.At), micros(p.LeaseUntil)}})
	return n == 1, err
}

// EffectTransition moves a row from one state to another.
func (t *Executor) EffectTransition(ctx context.Context, p store.EffectTransitionParams) (bool, error) {
	set := `state = $1, updated_at = $2`
	args := []any{p.To, micros(p.At)}
	if p.To == seqboxtype.EffectPending {
		set += `, calls = calls + 1, lease_until = $3`
		args = append(args, micros(p.LeaseUntil))
	}
	where, args := whereCall(p.Call, p.IdempotencyKey, []seqboxtype.Effect{p.From}, args, 0)
	return affectedOne(t.exec(ctx, `UPDATE seqbox_effects SET `+set+` WHERE `+where, args...))
}

// EffectRecord records a call's outcome on a row in one of p.From.
func (t *Executor) EffectRecord(ctx context.Context, p store.EffectRecordParams) error {
	if len(p.From) == 0 {
		return nil
	}
	q, args := effectRecordStmt(p, 0)
	n, err := t.single(ctx, store.Statement{Query: q, Args: args})
	if err != nil || p.Calls == 0 {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// effectRecordStmt is EffectRecord's UPDATE, its placeholders numbered
// from off+1.
func effectRecordStmt(p store.EffectRecordParams, off int) (string, []any) {
	mark := func(args []any) string { return fmt.Sprintf("$%d", off+len(args)) }
	args := []any{p.To}
	set := "state = " + mark(args)
	args = append(args, p.Ref)
	set += ", ref = " + mark(args)
	args = append(args, p.LastError)
	set += ", last_error = " + mark(args)
	args = append(args, micros(p.At))
	at := mark(args)
	set += ", updated_at = " + at
	if p.To == seqboxtype.EffectUncertain {
		set += ", uncertain_at = COALESCE(uncertain_at, " + at + ")"
	}
	if p.Reconciled {
		set += ", reconciled_at = " + at
	}
	where, args := whereCall(p.Call, p.IdempotencyKey, p.From, args, off)
	if p.Calls != 0 {
		args = append(args, p.Calls)
		where += " AND calls = " + mark(args)
	}
	return "UPDATE seqbox_effects SET " + set + " WHERE " + where, args
}

// EffectRenewLease moves a pending row's lease on.
func (t *Executor) EffectRenewLease(ctx context.Context, p store.EffectRenewLeaseParams) error {
	where, args := whereCall(p.Call, p.IdempotencyKey, []seqboxtype.Effect{seqboxtype.EffectPending}, []any{micros(p.Until)}, 0)
	_, err := t.exec(ctx, `UPDATE seqbox_effects SET lease_until = $1 WHERE `+where, args...)
	return err
}

// EffectList lists ledger rows, oldest change first.
func (t *Executor) EffectList(ctx context.Context, p store.EffectListParams) ([]store.EffectRow, error) {
	var where []string
	var args []any
	for _, c := range []struct{ col, val string }{{"consumer", p.Consumer}, {"action", p.Action}} {
		if c.val != "" {
			args = append(args, c.val)
			where = append(where, fmt.Sprintf("%s = $%d", c.col, len(args)))
		}
	}
	switch p.State {
	case "":
	case seqboxtype.EffectUncertain:
		args = append(args, micros(p.Now))
		where = append(where, fmt.Sprintf(uncertainOrLost, len(args)))
	case seqboxtype.EffectPending:
		args = append(args, micros(p.Now))
		where = append(where, fmt.Sprintf("state = 'pending' AND lease_until > $%d", len(args)))
	default:
		args = append(args, p.State)
		where = append(where, fmt.Sprintf("state = $%d", len(args)))
	}
	if p.State != "" && p.State != seqboxtype.EffectSucceeded {
		// Through the index of open calls' states; succeeded calls are
		// not in it, and a list of them reads the ledger.
		where = append(where, openCall)
	}
	q := `SELECT ` + effectColumns + ` FROM seqbox_effects`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, p.Limit)
	rows, err := t.db.QueryContext(ctx, q+fmt.Sprintf(` ORDER BY updated_at, idempotency_key LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.EffectRow
	for rows.Next() {
		e, err := scanEffect(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// uncertainOrLost selects the uncertain rows and the pending ones whose
// lease ran out by the time in parameter %d: spelled as one IN over the
// state, which SQLite answers from the index of open calls' states
// (a disjunction of two states it would answer with a scan).
const uncertainOrLost = `state IN ('uncertain', 'pending') AND (state = 'uncertain' OR lease_until IS NULL OR lease_until <= $%d)`

// EffectCountUncertain counts the uncertain calls by consumer and action.
func (t *Executor) EffectCountUncertain(ctx context.Context, now time.Time) ([]store.EffectUncertainCount, error) {
	rows, err := t.query(ctx, `SELECT consumer, action, COUNT(*), MIN(updated_at) FROM seqbox_effects
		WHERE `+fmt.Sprintf(uncertainOrLost, 1)+` AND `+openCall+`
		GROUP BY consumer, action ORDER BY consumer, action`, micros(now))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.EffectUncertainCount
	for rows.Next() {
		var u store.EffectUncertainCount
		var oldest int64
		if err := rows.Scan(&u.Consumer, &u.Action, &u.Count, &oldest); err != nil {
			return nil, err
		}
		u.Oldest = time.UnixMicro(oldest).UTC()
		out = append(out, u)
	}
	return out, rows.Err()
}

// affectedOne reports whether a statement changed exactly one row.
func affectedOne(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
