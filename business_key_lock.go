package seqbox

import (
	"context"
	"slices"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
)

// Locks taken before a delivery's savepoint (docs/design.md §10.1, §10.2).
// A message that stops to be decided rolls its writes back to its
// savepoint and then takes its key's turn; PostgreSQL lets go a lock taken
// after a savepoint when it is rolled back to, so a lock the turn relies
// on must be taken before it.
//
// The partition key's turn. Its row lock (lockKey) orders the
// transactions of one key: without it held through TurnTake, another
// process's transaction did not see the uncommitted turn and decided and
// applied the key's next event first (lockTurnKey).
//
// The business-key reservation. With Decide, an
// event's business key is reserved by the turn it takes before its
// decision is asked for; the check that no other identity holds one
// (BusinessKeyInFlight) and that turn (TurnTake) must be one step against
// other transactions, or two events of one business key, checked at the
// same instant, both reach the agent. The store makes them one step with
// BusinessKeyLock, taken outside any delivery's savepoint (rolling one
// back would let the lock go) and held to the commit.

// lockBusinessKeys locks the business keys of a batch's inputs before any
// of them runs, in byte order: a transaction then never waits for a
// business key while holding a partition key's lock another waits for.
func (p *pipeline) lockBusinessKeys(ctx context.Context, tx *batchTx, ins []input) error {
	if p.cfg.Decide == nil {
		return nil
	}
	var keys []string
	for _, in := range ins {
		if in.parsed && in.perr == nil && in.ev.BusinessKey != "" {
			keys = append(keys, in.ev.BusinessKey)
		}
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		if err := tx.lockBusinessKey(ctx, p.cfg.Name, k); err != nil {
			return err
		}
	}
	return nil
}

// lockBusinessKey locks ev's business key before its delivery's savepoint,
// for a message the batch did not lock up front (one let out of the
// parked table).
func (p *pipeline) lockBusinessKey(ctx context.Context, tx *batchTx, ev seqboxtype.Event) error {
	if p.cfg.Decide == nil || ev.BusinessKey == "" {
		return nil
	}
	return tx.lockBusinessKey(ctx, p.cfg.Name, ev.BusinessKey)
}

// lockTurnKey locks ev's partition key before its delivery's savepoint,
// for a consumer with Decide on a store whose write transactions run side
// by side (PostgreSQL), so that the turn it may take holds the key's lock
// to the commit. SQLite runs one writer at a time and needs none.
func (p *pipeline) lockTurnKey(ctx context.Context, tx *batchTx, ev seqboxtype.Event, now time.Time) error {
	if p.cfg.Decide == nil || ev.PartitionKey == "" || p.serialWriters {
		return nil
	}
	_, err := p.lockKey(ctx, tx, ev.PartitionKey, now)
	return err
}
