package seqbox

import (
	"context"
	"database/sql"

	"github.com/seqbox/seqbox/seqboxtype"
)

// Tx is the transaction a Handler writes its business effects in. It is
// the same transaction that records the inbox identity, so the effect and
// the identity commit together or not at all. *sql.Tx satisfies it.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Handler applies one event. It runs inside the inbox transaction, after
// every gate has passed; returning an error rolls back its writes, and
// only its own. Wrap an error with Permanent to dead-letter at once
// instead of retrying.
//
// A batch first runs without savepoints. When a handler fails, the batch's
// transaction rolls back and runs again with a savepoint per delivery:
// the failing handler is not called again (its error is recorded as it
// was), but the handlers before it in the batch are, since their writes
// rolled back. So a handler may be called more than once for one
// delivery; everything it does in tx commits exactly once. Effects
// outside tx need an idempotency key, as they do for any redelivery.
//
// Within a batch, seqbox's own rows of earlier deliveries (inbox
// outcomes, key versions) may be written only at the end of the batch:
// a handler should not read seqbox's tables.
//
// On PostgreSQL, in that first run, tx is not the *sql.Tx itself: its
// ExecContext queues the statement and returns without waiting, and the
// batch's handlers' statements are sent together, in order, before the
// commit (one round trip for the batch). A read through tx, or the
// RowsAffected of a queued statement, sends the queue first, so the
// handler sees its own writes. A queued statement that fails sends the
// batch to its run with savepoints, where tx is the *sql.Tx and each
// statement's error comes back from its own call. Slices and pointers to
// plain values passed as arguments are copied at the call; a handler that
// changes other values after passing them (a struct a driver.Valuer
// reads) should pass copies.
type Handler func(ctx context.Context, tx Tx, ev seqboxtype.Event) error

// BatchHandler applies many events in one call, inside the inbox
// transaction: the events of a batch that passed every gate, in the order
// they were applied (each key's in version order), so that their effects
// can be written with a few multi-row statements instead of one round trip
// per event. Set Config.BatchHandler instead of Config.Handler.
//
// A batch first runs without savepoints and hands every applied event to
// one call, just before the commit. When that call fails, the batch rolls
// back and runs again with a savepoint per delivery, and the handler is
// called with one event at a time: an error there is that event's own
// (retried, dead-lettered with Permanent, or concluded with Conclude), and only
// its writes roll back. So an event may be handed over more than once;
// everything the handler does in tx commits exactly once.
//
// A BatchHandler cannot be combined with Config.Decide: a recorded agent
// decision belongs to one event's call (DecisionFrom).
type BatchHandler func(ctx context.Context, tx Tx, evs []seqboxtype.Event) error
