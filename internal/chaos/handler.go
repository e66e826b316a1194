package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math/rand/v2"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
)

// Consumer is the consumer name every chaos process uses.
const Consumer = "chaos"

const fixedSchema = `CREATE TABLE IF NOT EXISTS chaos_fixed (id TEXT PRIMARY KEY)`

// ensureTables creates the business tables the chaos handler writes.
func ensureTables(ctx context.Context, db *sql.DB) error {
	return replay.EnsureRecordTables(ctx, db, fixedSchema, emitSeqSchema)
}

// handler is the record handler with trouble: a "flaky" event fails
// transiently three times in ten, and a "poison" event fails permanently
// until its id is in chaos_fixed (the operator's fix before a redrive).
func handler() seqbox.Handler {
	record := replay.RecordHandler(Consumer)
	return func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		var data struct {
			Fail string `json:"fail"`
		}
		_ = json.Unmarshal(ev.Data, &data)
		switch data.Fail {
		case "flaky":
			if rand.Float64() < 0.3 {
				return errors.New("chaos: flaky dependency timed out")
			}
		case "poison":
			var fixed int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM chaos_fixed WHERE id = $1`, ev.ID).Scan(&fixed); err != nil {
				return err
			}
			if fixed == 0 {
				return seqbox.Permanent(errors.New("chaos: poison message"))
			}
		}
		// The record handler must not see the chaos markers as its own.
		ev.Data = nil
		return record(ctx, tx, ev)
	}
}
