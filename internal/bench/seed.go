package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/seqbox/seqbox/store"
)

// seedInsert writes one inbox identity of the bench consumer directly,
// bypassing the pipeline: only the columns without defaults.
const seedInsert = `INSERT INTO seqbox_inbox (consumer, source, id, payload_hash, event_type, outcome,
	received_at, processed_at, retention_until) `

// seedChunk is how many rows one PostgreSQL seed statement generates.
const seedChunk = 100_000

// seed inserts n identities (source, "s0".."s<n-1>") for the bench consumer
// whose retention ended at until, in one transaction: a prepared INSERT
// per row on SQLite, generate_series in chunks on PostgreSQL.
func seed(ctx context.Context, e *env, source, outcome string, n int, until time.Time) error {
	received := until.Add(-31 * 24 * time.Hour).UnixMicro()
	tx, err := e.st.DB().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if e.pg {
		for from := 0; from < n; from += seedChunk {
			to := min(from+seedChunk, n) - 1
			if _, err := tx.ExecContext(ctx, seedInsert+`SELECT $1::text, $2::text, 's' || g, 'seed', 'bench.seed', $3::text,
				$4::bigint, $4::bigint, $5::bigint FROM generate_series($6::bigint, $7::bigint) g`,
				Consumer, source, outcome, received, until.UnixMicro(), from, to); err != nil {
				return fmt.Errorf("seed: %w", err)
			}
		}
	} else {
		stmt, err := tx.PrepareContext(ctx, seedInsert+`VALUES ($1, $2, $3, 'seed', 'bench.seed', $4, $5, $5, $6)`)
		if err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		defer stmt.Close()
		for i := range n {
			if _, err := stmt.ExecContext(ctx, Consumer, source, "s"+strconv.Itoa(i), outcome, received, until.UnixMicro()); err != nil {
				return fmt.Errorf("seed: %w", err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	return nil
}

// inboxCounts are the rows the purge check looks at.
type inboxCounts struct {
	// Purgeable: the bench consumer's identities whose retention ended and
	// that are neither held nor blocked, every run's.
	Purgeable int64
	// Seeded, Held, Live: this run's expired, expired-but-held and live
	// identities.
	Seeded, Held, Live int64
	// LiveEffects: the record handler's rows for this run's live messages.
	LiveEffects int64
}

// countInbox counts the rows the purge check needs, as a purge at now
// would see them.
func countInbox(ctx context.Context, e *env, now time.Time, seedSrc, heldSrc, liveSrc string) (inboxCounts, error) {
	var c inboxCounts
	err := e.st.DB().QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM seqbox_inbox WHERE consumer = $1 AND retention_until < $2 AND outcome NOT IN ('held', 'blocked')),
		(SELECT COUNT(*) FROM seqbox_inbox WHERE consumer = $1 AND source = $3),
		(SELECT COUNT(*) FROM seqbox_inbox WHERE consumer = $1 AND source = $4),
		(SELECT COUNT(*) FROM seqbox_inbox WHERE consumer = $1 AND source = $5),
		(SELECT COUNT(*) FROM seqbox_record_effects WHERE consumer = $1 AND source = $5)`,
		Consumer, now.UnixMicro(), seedSrc, heldSrc, liveSrc).Scan(&c.Purgeable, &c.Seeded, &c.Held, &c.Live, &c.LiveEffects)
	return c, err
}

// purgeTimes records how long each purge batch (one PurgeInbox call, one
// transaction) took, in order.
type purgeTimes struct {
	mu sync.Mutex
	ds []time.Duration
}

func (p *purgeTimes) all() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.ds...)
}

// timedStore times the purge batches of the store it wraps.
type timedStore struct {
	store.Store
	times *purgeTimes
}

func (s timedStore) Executor() store.Executor {
	return timedExecutor{Executor: s.Store.Executor(), times: s.times}
}

type timedExecutor struct {
	store.Executor
	times *purgeTimes
}

func (o timedExecutor) InboxPurge(ctx context.Context, p store.InboxPurgeParams) (store.InboxPurgeResult, error) {
	t0 := time.Now()
	n, err := o.Executor.InboxPurge(ctx, p)
	d := time.Since(t0)
	o.times.mu.Lock()
	o.times.ds = append(o.times.ds, d)
	o.times.mu.Unlock()
	return n, err
}
