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
// applied the key's next event first (lockForTurn).
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

// lockForTurn takes, for a consumer with Decide, the locks a message's
// turn relies on, before its savepoint: its business key, when the batch
// did not lock it up front (a message let out of the parked table), and,
// on a store whose write transactions run side by side (PostgreSQL), its
// partition key, so that the turn it may take holds the key's lock to
// the commit. SQLite runs one writer at a time and needs the latter not.
func (p *pipeline) lockForTurn(ctx context.Context, tx *batchTx, ev seqboxtype.Event, now time.Time) error {
	if ev.BusinessKey != "" {
		if err := tx.lockBusinessKey(ctx, p.cfg.Name, ev.BusinessKey); err != nil {
			return err
		}
	}
	if ev.PartitionKey == "" || p.serialWriters {
		return nil
	}
	_, _, err := p.lockKey(ctx, tx, ev.PartitionKey, now)
	return err
}
