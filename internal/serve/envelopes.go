package serve

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox"
)

// The gateway's tables (the envelopes its handler applied, the tombstones
// of identities retention purged) are the store's: migration 10 creates
// them.

// identHash names (consumer, source, id) in the gateway's tables.
func identHash(consumer, source, id string) string {
	h := sha256.New()
	for _, s := range []string{consumer, source, id} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// envelopes records what the handler applied, and notices identities
// that come back after retention purged them.
type envelopes struct {
	consumer string
	// tombstones is set while the tombstone table may hold rows: only
	// then are committed decisions checked against it.
	tombstones atomic.Bool
	// pending holds the identities of committed decisions waiting to be
	// checked, in batches, by watchTombstones.
	pending chan string
}

func newEnvelopes(consumer string) *envelopes {
	return &envelopes{consumer: consumer, pending: make(chan string, 8192)}
}

// record stores the applied envelope, inside the handler's transaction.
func (e *envelopes) record(ctx context.Context, tx seqbox.Tx, ev seqbox.Event, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO gateway_envelopes (ident, consumer, source, id, envelope, applied_at, businesskey)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		identHash(e.consumer, ev.Source, ev.ID), e.consumer, ev.Source, ev.ID, string(ev.Raw), now.UnixMicro(), ev.BusinessKey)
	return err
}

// committed queues a committed decision's identity for the tombstone
// check (best effort: when the buffer is full the check is skipped).
func (e *envelopes) committed(d seqbox.Result) {
	if !e.tombstones.Load() || d.Outcome == seqbox.Rejected || d.Outcome == seqbox.Duplicate {
		return
	}
	select {
	case e.pending <- identHash(e.consumer, d.Source, d.ID):
	default:
	}
}

// watchTombstones checks the queued identities against the tombstones
// once a second, in one statement, and counts each one found: an
// identity delivered again after retention purged it. Until ctx ends.
func (e *envelopes) watchTombstones(ctx context.Context, db *sql.DB, found func(n int64), logger interface {
	Warn(msg string, args ...any)
}) {
	var n int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM gateway_tombstones WHERE consumer = $1`, e.consumer).Scan(&n); err == nil && n > 0 {
		e.tombstones.Store(true)
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var idents []any
	drain:
		for len(idents) < 500 {
			select {
			case id := <-e.pending:
				idents = append(idents, id)
			default:
				break drain
			}
		}
		if len(idents) == 0 {
			continue
		}
		marks := make([]string, len(idents))
		for i := range idents {
			marks[i] = "$" + strconv.Itoa(i+1)
		}
		res, err := db.ExecContext(ctx, `DELETE FROM gateway_tombstones WHERE ident IN (`+strings.Join(marks, ", ")+`)`, idents...)
		if err != nil {
			if ctx.Err() == nil {
				logger.Warn("seqbox serve: tombstone check failed", "err", err)
			}
			continue
		}
		if k, _ := res.RowsAffected(); k > 0 {
			found(k)
		}
	}
}

// envelope reads the applied envelope of an identity.
func envelopeOf(ctx context.Context, db *sql.DB, consumer, source, id string) ([]byte, bool, error) {
	var env string
	err := db.QueryRowContext(ctx, `SELECT envelope FROM gateway_envelopes WHERE ident = $1`, identHash(consumer, source, id)).Scan(&env)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	return []byte(env), err == nil, err
}

// purgeEnvelopes removes, batch at a time, the envelopes applied before
// cutoff, leaving a tombstone each, and drops tombstones older than
// tombCutoff. It returns how many envelopes it removed.
func purgeEnvelopes(ctx context.Context, db *sql.DB, consumer string, cutoff, tombCutoff, now time.Time, batch int) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return total, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO gateway_tombstones (ident, consumer, purged_at)
			SELECT ident, consumer, $3 FROM gateway_envelopes WHERE consumer = $1 AND applied_at < $2
			ORDER BY applied_at LIMIT $4 ON CONFLICT DO NOTHING`, consumer, cutoff.UnixMicro(), now.UnixMicro(), batch); err != nil {
			tx.Rollback()
			return total, err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM gateway_envelopes WHERE ident IN (
			SELECT ident FROM gateway_envelopes WHERE consumer = $1 AND applied_at < $2 ORDER BY applied_at LIMIT $3)`,
			consumer, cutoff.UnixMicro(), batch)
		if err != nil {
			tx.Rollback()
			return total, err
		}
		if err := tx.Commit(); err != nil {
			return total, err
		}
		n, _ := res.RowsAffected()
		total += n
		if n < int64(batch) {
			break
		}
	}
	_, err := db.ExecContext(ctx, `DELETE FROM gateway_tombstones WHERE consumer = $1 AND purged_at < $2`, consumer, tombCutoff.UnixMicro())
	return total, err
}
