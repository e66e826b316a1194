package serve

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// The gateway's tables (the envelopes its handler applied, the tombstones
// of identities retention purged) are the store's: migration 10 creates
// them, and the store's Gateway* methods read and write them.

// envelopes records what the handler applied, and notices identities
// that come back after retention purged them.
type envelopes struct {
	consumer string
	// tombstones is set while the tombstone table may hold rows: only
	// then are committed decisions checked against it.
	tombstones atomic.Bool
	// pending holds the identities of committed decisions waiting to be
	// checked, in batches, by watchTombstones.
	pending chan store.Identity
}

func newEnvelopes(consumer string) *envelopes {
	return &envelopes{consumer: consumer, pending: make(chan store.Identity, 8192)}
}

// record stores the applied envelope, inside the handler's transaction
// (the store transaction the handler's ctx carries).
func (e *envelopes) record(ctx context.Context, ev seqboxtype.Event, now time.Time) error {
	tx, err := own.Tx(ctx)
	if err != nil {
		return fmt.Errorf("record the applied envelope: %w", err)
	}
	return tx.GatewayEnvelopeInsert(ctx, store.GatewayEnvelope{Consumer: e.consumer, Source: ev.Source, ID: ev.ID,
		Envelope: ev.Raw, BusinessKey: ev.BusinessKey, AppliedAt: now})
}

// committed queues a committed decision's identity for the tombstone
// check (best effort: when the buffer is full the check is skipped).
func (e *envelopes) committed(res seqboxtype.Result) {
	if !e.tombstones.Load() || res.Outcome == seqboxtype.Rejected || res.Outcome == seqboxtype.Duplicate {
		return
	}
	select {
	case e.pending <- store.Identity{Source: res.Source, ID: res.ID}:
	default:
	}
}

// watchTombstones checks the queued identities against the tombstones
// once a second, in one call, and counts each one found: an identity
// delivered again after retention purged it. Until ctx ends.
func (e *envelopes) watchTombstones(ctx context.Context, ex store.Executor, found func(n int64), logger interface {
	Warn(msg string, args ...any)
}) {
	if n, err := ex.GatewayTombstoneCount(ctx, e.consumer); err == nil && n > 0 {
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
		var ids []store.Identity
	drain:
		for len(ids) < 500 {
			select {
			case id := <-e.pending:
				ids = append(ids, id)
			default:
				break drain
			}
		}
		if len(ids) == 0 {
			continue
		}
		k, err := ex.GatewayTombstoneTake(ctx, store.GatewayTombstoneTakeParams{Consumer: e.consumer, IDs: ids})
		if err != nil {
			if ctx.Err() == nil {
				logger.Warn("seqbox serve: tombstone check failed", "err", err)
			}
			continue
		}
		if k > 0 {
			found(k)
		}
	}
}

// envelopeOf reads the applied envelope of an identity.
func envelopeOf(ctx context.Context, ex store.Executor, consumer, source, id string) ([]byte, bool, error) {
	env, err := ex.GatewayEnvelopeGet(ctx, store.MessageRef{Consumer: consumer, Source: source, ID: id})
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	return env, err == nil, err
}

// purgeEnvelopes removes, batch at a time, the envelopes applied before
// cutoff, leaving a tombstone each, and the identities ingest accepted
// before it (a copy posted after that is queued again, and the inbox or
// its tombstone says what it is), and drops tombstones older than
// tombCutoff. It returns how many envelopes it removed.
func purgeEnvelopes(ctx context.Context, ex store.Executor, consumer string, cutoff, tombCutoff, now time.Time, batch int) (int64, error) {
	for ctx.Err() == nil {
		n, err := ex.GatewayAcceptedPurge(ctx, store.GatewayAcceptedPurgeParams{Consumer: consumer, Before: cutoff, Limit: batch})
		if err != nil {
			return 0, err
		}
		if n < int64(batch) {
			break
		}
	}
	var total int64
	for ctx.Err() == nil {
		n, err := ex.GatewayEnvelopePurge(ctx, store.GatewayEnvelopePurgeParams{Consumer: consumer, Before: cutoff, Now: now, Limit: batch})
		total += n
		if err != nil {
			return total, err
		}
		if n < int64(batch) {
			break
		}
	}
	_, err := ex.GatewayTombstonePurge(ctx, store.GatewayTombstonePurgeParams{Consumer: consumer, Before: tombCutoff})
	return total, err
}
