package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
)

// Emit writes event, a structured-mode CloudEvent, to the outbox through
// tx, the handler's transaction, so it is published if and only if that
// transaction commits. The event is validated as a consumer would
// validate it (seqboxtype.ParseEvent); an invalid one is refused with the
// error that names the field, and nothing is written. Events of one
// partitionkey (or, without one, of one id) are published in the order
// they were emitted.
func Emit(ctx context.Context, tx seqbox.Tx, event []byte) error {
	ev, err := seqboxtype.ParseEvent(event)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	key := ev.PartitionKey
	if key == "" {
		key = ev.Source + "\x00" + ev.ID
	}
	origin := ""
	if id, ok := seqbox.IdentityFrom(ctx); ok {
		origin = id.Consumer
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO seqbox_outbox (origin, partitionkey, event_id, body, created_at)
		VALUES ($1, $2, $3, $4, $5)`, origin, key, ev.ID, event, time.Now().UnixMicro())
	if err != nil {
		return fmt.Errorf("outbox: emit %s: %w", ev.ID, err)
	}
	return nil
}
