package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/seqbox/seqbox/store"
)

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

const decisionQuery = `SELECT decision FROM seqbox_decisions WHERE consumer = $1 AND source = $2 AND id = $3`

func readDecision(ctx context.Context, q queryer, consumer, source, id string) ([]byte, error) {
	var d []byte
	err := q.QueryRowContext(ctx, decisionQuery, consumer, source, id).Scan(&d)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return d, err
}

// DecisionGet reads the decision recorded for an identity.
func (t *Tx) DecisionGet(ctx context.Context, consumer, source, id string) ([]byte, error) {
	return readDecision(ctx, t.tx, consumer, source, id)
}

// DecisionRecord stores a decision inside the batch transaction.
func (t *Tx) DecisionRecord(ctx context.Context, consumer, source, id string, decision []byte, at time.Time) error {
	_, err := t.exec(ctx, insertDecision, consumer, source, id, decision, micros(at))
	return err
}

const insertDecision = `INSERT INTO seqbox_decisions (consumer, source, id, decision, decided_at)
	VALUES ($1, $2, $3, $4, $5) ON CONFLICT (consumer, source, id) DO NOTHING`

func (o operator) DecisionGet(ctx context.Context, consumer, source, id string) ([]byte, error) {
	return readDecision(ctx, o.db, consumer, source, id)
}

func (o operator) DecisionRecord(ctx context.Context, consumer, source, id string, decision []byte, at time.Time) ([]byte, error) {
	if _, err := o.db.ExecContext(ctx, insertDecision, consumer, source, id, decision, micros(at)); err != nil {
		return nil, err
	}
	return readDecision(ctx, o.db, consumer, source, id)
}

func (o operator) InboxSeen(ctx context.Context, consumer, source, id string) (string, string, bool, error) {
	var outcome, hash string
	err := o.db.QueryRowContext(ctx, `SELECT outcome, payload_hash FROM seqbox_inbox
		WHERE consumer = $1 AND source = $2 AND id = $3`, consumer, source, id).Scan(&outcome, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", false, nil
	}
	return outcome, hash, err == nil, err
}

func (o operator) KeyVersion(ctx context.Context, consumer, key string) (*int64, error) {
	var v sql.NullInt64
	err := o.db.QueryRowContext(ctx, `SELECT version FROM seqbox_keys WHERE consumer = $1 AND partitionkey = $2`,
		consumer, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return ptrInt(v), err
}

func (o operator) DecisionClaim(ctx context.Context, consumer, source, id, owner string, now, until time.Time) (bool, time.Time, error) {
	res, err := o.db.ExecContext(ctx, `INSERT INTO seqbox_decision_claims (consumer, source, id, owner, expires_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (consumer, source, id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
		WHERE seqbox_decision_claims.owner = excluded.owner OR seqbox_decision_claims.expires_at <= $6`,
		consumer, source, id, owner, micros(until), micros(now))
	if err != nil {
		return false, time.Time{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return n == 1, until, err
	}
	var held int64
	err = o.db.QueryRowContext(ctx, `SELECT expires_at FROM seqbox_decision_claims
		WHERE consumer = $1 AND source = $2 AND id = $3`, consumer, source, id).Scan(&held)
	if errors.Is(err, sql.ErrNoRows) {
		return false, now, nil // released meanwhile: try again at once
	}
	return false, time.UnixMicro(held), err
}

func (o operator) DecisionUnclaim(ctx context.Context, consumer, source, id, owner string) error {
	_, err := o.db.ExecContext(ctx, `DELETE FROM seqbox_decision_claims
		WHERE consumer = $1 AND source = $2 AND id = $3 AND owner = $4`, consumer, source, id, owner)
	return err
}
