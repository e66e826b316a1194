package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

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
	st := gatewayEnvelopeStatement(e)
	_, err := t.exec(ctx, st.Query, st.Args...)
	return err
}

// gatewayEnvelopeStatement is GatewayEnvelopeInsert's statement.
func gatewayEnvelopeStatement(e store.GatewayEnvelope) store.Statement {
	return store.Statement{Query: `INSERT INTO seqbox_gateway_envelopes (ident, consumer, source, id, envelope, applied_at, businesskey)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		Args: []any{gatewayIdent(e.Consumer, e.Source, e.ID), e.Consumer, e.Source, e.ID, string(e.Envelope), micros(e.AppliedAt), e.BusinessKey}}
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
	e.db, e.tx, e.unlock, e.group, e.pipes = tx, tx, nil, nil, nil
	if err := fn(&e); err != nil {
		_ = tx.Rollback()
		return err
	}
	return e.storageError("commit", tx.Commit())
}

// GatewayAccept records each copy that is its identity's first and reads
// the first copy of the others, set-based: the new identities in one
// INSERT … ON CONFLICT DO NOTHING RETURNING (arrays on PostgreSQL, chunks
// of rows on SQLite), the ones seen before in one read.
func (t *Executor) GatewayAccept(ctx context.Context, p store.GatewayAcceptParams) ([]store.GatewayAccepted, error) {
	idents := make([]string, len(p.Copies))
	first := map[string]int{} // ident → its first copy in this call
	var uniq []int
	for i, c := range p.Copies {
		idents[i] = gatewayIdent(p.Consumer, c.Source, c.ID)
		if _, ok := first[idents[i]]; !ok {
			first[idents[i]] = i
			uniq = append(uniq, i)
		}
	}
	inserted, err := t.acceptInsert(ctx, p, idents, uniq)
	if err != nil {
		return nil, err
	}
	var before []string
	for _, i := range uniq {
		if !inserted[idents[i]] {
			before = append(before, idents[i])
		}
	}
	seen, err := t.acceptedRead(ctx, before)
	if err != nil {
		return nil, err
	}
	out := make([]store.GatewayAccepted, len(p.Copies))
	for i, c := range p.Copies {
		id := idents[i]
		switch f := first[id]; {
		case inserted[id] && i == f:
			out[i] = store.GatewayAccepted{New: true, First: c}
		case inserted[id]:
			out[i] = store.GatewayAccepted{First: p.Copies[f]}
		default:
			got, ok := seen[id]
			if !ok {
				return nil, fmt.Errorf("gateway accept %s/%s: neither inserted nor found", c.Source, c.ID)
			}
			got.Source, got.ID = c.Source, c.ID
			out[i] = store.GatewayAccepted{First: got}
		}
	}
	return out, nil
}

// acceptInsert inserts the copies at uniq (one per identity) and returns
// the identities it inserted.
func (t *Executor) acceptInsert(ctx context.Context, p store.GatewayAcceptParams, idents []string, uniq []int) (map[string]bool, error) {
	inserted := make(map[string]bool, len(uniq))
	read := func(rows *sql.Rows, err error) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			inserted[id] = true
		}
		return rows.Err()
	}
	if len(uniq) == 0 {
		return inserted, nil
	}
	if t.arrays {
		ids, sources, names, hashes, ats := make([]string, len(uniq)), make([]string, len(uniq)), make([]string, len(uniq)),
			make([]string, len(uniq)), make([]int64, len(uniq))
		for j, i := range uniq {
			c := p.Copies[i]
			ids[j], sources[j], names[j], hashes[j], ats[j] = idents[i], c.Source, c.ID, c.PayloadHash, micros(c.At)
		}
		return inserted, read(t.query(ctx, `INSERT INTO seqbox_gateway_accepted (ident, consumer, source, id, payload_hash, accepted_at)
			SELECT u.ident, $1, u.source, u.id, u.hash, u.at FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])
				AS u(ident, source, id, hash, at)
			ON CONFLICT DO NOTHING RETURNING ident`, p.Consumer, ids, sources, names, hashes, ats))
	}
	err := eachChunk(len(uniq), func(lo, hi int) error {
		args := make([]any, 0, 1+(hi-lo)*5)
		args = append(args, p.Consumer)
		for _, i := range uniq[lo:hi] {
			c := p.Copies[i]
			args = append(args, idents[i], c.Source, c.ID, c.PayloadHash, micros(c.At))
		}
		return read(t.query(ctx, rowsText(`INSERT INTO seqbox_gateway_accepted (ident, consumer, source, id, payload_hash, accepted_at)
			VALUES {{ROWS}} ON CONFLICT DO NOTHING RETURNING ident`, "($a, $1, $b, $c, $d, $e)", 1, hi-lo), args...))
	})
	return inserted, err
}

// acceptedRead reads the first copies of identities accepted before.
func (t *Executor) acceptedRead(ctx context.Context, idents []string) (map[string]store.GatewayCopy, error) {
	out := make(map[string]store.GatewayCopy, len(idents))
	read := func(rows *sql.Rows, err error) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var c store.GatewayCopy
			var at int64
			if err := rows.Scan(&id, &c.PayloadHash, &at); err != nil {
				return err
			}
			c.At = time.UnixMicro(at).UTC()
			out[id] = c
		}
		return rows.Err()
	}
	if len(idents) == 0 {
		return out, nil
	}
	if t.arrays {
		return out, read(t.query(ctx, `SELECT ident, payload_hash, accepted_at FROM seqbox_gateway_accepted WHERE ident = ANY($1::text[])`, idents))
	}
	err := eachChunk(len(idents), func(lo, hi int) error {
		args := make([]any, 0, hi-lo)
		for _, id := range idents[lo:hi] {
			args = append(args, id)
		}
		return read(t.query(ctx, rowsText(`SELECT ident, payload_hash, accepted_at FROM seqbox_gateway_accepted WHERE ident IN ({{ROWS}})`,
			"$a", 0, hi-lo), args...))
	})
	return out, err
}

// GatewayAcceptedPurge removes the oldest accepted identities.
func (t *Executor) GatewayAcceptedPurge(ctx context.Context, p store.GatewayAcceptedPurgeParams) (int64, error) {
	res, err := t.exec(ctx, `DELETE FROM seqbox_gateway_accepted WHERE ident IN (
		SELECT ident FROM seqbox_gateway_accepted WHERE consumer = $1 AND accepted_at < $2 ORDER BY accepted_at LIMIT $3)`,
		p.Consumer, micros(p.Before), p.Limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// GatewaySecret returns the secret kept under a name, keeping the
// candidate first when there is none (seqbox_gateway_secrets, migration
// 16).
func (t *Executor) GatewaySecret(ctx context.Context, p store.GatewaySecretParams) (string, error) {
	if _, err := t.exec(ctx, `INSERT INTO seqbox_gateway_secrets (name, secret, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		p.Name, p.Candidate, micros(p.At)); err != nil {
		return "", err
	}
	var secret string
	err := t.queryRow(ctx, `SELECT secret FROM seqbox_gateway_secrets WHERE name = $1`, p.Name).Scan(&secret)
	return secret, err
}
