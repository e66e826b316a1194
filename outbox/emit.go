package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// ErrNoTransaction is returned by Emit when ctx carries no seqbox
// transaction: it was not called from a Handler with the ctx the Handler
// was given, nor given one with WithTx.
var ErrNoTransaction = errors.New("outbox: the context carries no seqbox transaction: call Emit from a Handler with the ctx it was given, " +
	"or, outside one, with outbox.WithTx(ctx, st.UnwrapTx(tx))")

// Emit writes event, a structured-mode CloudEvent, to the outbox through
// tx, the handler's transaction, so it is published if and only if that
// transaction commits. ctx must be the Handler's (or carry the
// transaction through WithTx): the store writes the event in the
// transaction ctx carries, which must be tx. The event is validated as a
// consumer would validate it (seqboxtype.ParseEvent); an invalid one is
// refused with the error that names the field, and nothing is written.
// Events of one partitionkey (or, without one, of one id) are published
// in the order they were emitted. An event without a traceparent gets
// ctx's (the handler's process span), so its consumer continues the
// trace; the attribute is volatile, so the payload hash is unchanged.
func Emit(ctx context.Context, tx seqbox.Tx, event []byte) error {
	ev, err := seqboxtype.ParseEvent(event)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	etx, err := own.Tx(ctx)
	if err != nil {
		return fmt.Errorf("%w (emit %s)", ErrNoTransaction, ev.ID)
	}
	sqlTx, ok := tx.(*sql.Tx)
	if u, queued := tx.(interface{ Unwrap() *sql.Tx }); queued {
		// A Handler's tx whose writes are sent together (PostgreSQL).
		sqlTx, ok = u.Unwrap(), true
	}
	if ok && sqlTx != etx.SQL() {
		return fmt.Errorf("outbox: emit %s: tx is not the transaction ctx carries: pass the Handler's own tx and ctx", ev.ID)
	}
	key := ev.PartitionKey
	if key == "" {
		key = ev.Source + "\x00" + ev.ID
	}
	origin := ""
	if id, ok := seqbox.IdentityFrom(ctx); ok {
		origin = id.Consumer
	}
	body := withTraceContext(ctx, event, ev.TraceParent != "")
	if _, err := etx.OutboxInsert(ctx, store.OutboxEvent{Origin: origin, PartitionKey: key, EventID: ev.ID,
		Body: body, CreatedAt: time.Now()}); err != nil {
		return fmt.Errorf("outbox: emit %s: %w", ev.ID, err)
	}
	return nil
}

// WithTx returns ctx carrying tx, a store transaction, so that Emit
// called outside a Handler writes in it: open it with st.Begin, or wrap
// a *sql.Tx opened on st.DB() with st.UnwrapTx, and pass its SQL() (or
// that *sql.Tx) to Emit. A Handler's ctx carries its transaction already.
func WithTx(ctx context.Context, tx store.ExecutorTx) context.Context {
	return own.WithTx(ctx, tx)
}
