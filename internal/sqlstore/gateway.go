package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/seqbox/seqbox/store"
)

// The gateway's statements (seqbox serve): seqbox_gateway_envelopes and
// seqbox_gateway_tombstones, migration 10.

// gatewayIdent names (consumer, source, id) in the gateway's tables: a
// hash, which bounds the key whatever the attribute lengths. Rows written
// by earlier seqbox versions are keyed the same way.
func gatewayIdent(consumer, source, id string) string {
	h := sha256.New()
	for _, s := range []string{consumer, source, id} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// GatewayEnvelopeInsert keeps an applied envelope; the first one stays.
func (t *Executor) GatewayEnvelopeInsert(ctx context.Context, e store.GatewayEnvelope) error {
	_, err := t.exec(ctx, `INSERT INTO seqbox_gateway_envelopes (ident, consumer, source, id, envelope, applied_at, businesskey)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		gatewayIdent(e.Consumer, e.Source, e.ID), e.Consumer, e.Source, e.ID, string(e.Envelope), micros(e.AppliedAt), e.BusinessKey)
	return err
}

// GatewayEnvelopeGet reads an identity's kept envelope.
func (t *Executor) GatewayEnvelopeGet(ctx context.Context, p store.MessageRef) ([]byte, error) {
	var env string
	err := t.queryRow(ctx, `SELECT envelope FROM seqbox_gateway_envelopes WHERE ident = $1`,
		gatewayIdent(p.Consumer, p.Source, p.ID)).Scan(&env)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return []byte(env), nil
}

// GatewayEnvelopePurge turns the oldest envelopes into tombstones.
func (t *Executor) GatewayEnvelopePurge(ctx context.Context, p store.GatewayEnvelopePurgeParams) (int64, error) {
	var n int64
	err := t.inTx(ctx, func(e *Executor) error {
		if _, err := e.exec(ctx, `INSERT INTO seqbox_gateway_tombstones (ident, consumer, purged_at)
			SELECT ident, consumer, $3 FROM seqbox_gateway_envelopes WHERE consumer = $1 AND applied_at < $2
			ORDER BY applied_at LIMIT $4 ON CONFLICT DO NOTHING`, p.Consumer, micros(p.Before), micros(p.Now), p.Limit); err != nil {
			return err
		}
		res, err := e.exec(ctx, `DELETE FROM seqbox_gateway_envelopes WHERE ident IN (
			SELECT ident FROM seqbox_gateway_envelopes WHERE consumer = $1 AND applied_at < $2 ORDER BY applied_at LIMIT $3)`,
			p.Consumer, micros(p.Before), p.Limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// GatewayTombstoneCount counts a consumer's tombstones.
func (t *Executor) GatewayTombstoneCount(ctx context.Context, consumer string) (int64, error) {
	var n int64
	err := t.queryRow(ctx, `SELECT COUNT(*) FROM seqbox_gateway_tombstones WHERE consumer = $1`, consumer).Scan(&n)
	return n, err
}

// GatewayTombstoneTake deletes the tombstones of identities, in chunks.
func (t *Executor) GatewayTombstoneTake(ctx context.Context, p store.GatewayTombstoneTakeParams) (int64, error) {
	var total int64
	err := eachChunk(len(p.IDs), func(lo, hi int) error {
		args := make([]any, 0, hi-lo)
		for _, id := range p.IDs[lo:hi] {
			args = append(args, gatewayIdent(p.Consumer, id.Source, id.ID))
		}
		res, err := t.exec(ctx, rowsText(`DELETE FROM seqbox_gateway_tombstones WHERE ident IN ({{ROWS}})`, "$a", 0, hi-lo), args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		total += n
		return err
	})
	return total, err
}

// GatewayTombstonePurge drops old tombstones.
func (t *Executor) GatewayTombstonePurge(ctx context.Context, p store.GatewayTombstonePurgeParams) (int64, error) {
	res, err := t.exec(ctx, `DELETE FROM seqbox_gateway_tombstones WHERE consumer = $1 AND purged_at < $2`, p.Consumer, micros(p.Before))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// inTx runs fn in the executor's transaction, or in a short one of its
// own on the pool.
func (t *Executor) inTx(ctx context.Context, fn func(e *Executor) error) error {
	if t.tx != nil {
		return fn(t)
	}
	tx, err := t.pool.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	e := *t
	e.db, e.tx, e.unlock, e.group = tx, tx, nil, nil
	if err := fn(&e); err != nil {
		_ = tx.Rollback()
		return err
	}
	return e.storageError("commit", tx.Commit())
}
