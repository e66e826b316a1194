// Package replay is the machinery behind `seqbox replay`: it feeds
// CloudEvents JSON lines one by one through the full pipeline to the
// built-in record handler and prints every decision.
package replay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/seqboxtype"
)

// recordSchema is the record handler's business tables: one effect row per
// applied event, and the object state (the applied event's type at its
// version).
//
// n is the effect's position: an auto-increment, so within one key (whose
// transactions the version gate serializes) it is the commit order.
const recordSchema = `CREATE TABLE IF NOT EXISTS record_effects (
	n {{SERIAL}}, consumer TEXT NOT NULL, source TEXT NOT NULL, id TEXT NOT NULL,
	partitionkey TEXT NOT NULL, objectversion BIGINT, type TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS record_objects (
	consumer TEXT NOT NULL, partitionkey TEXT NOT NULL, state TEXT NOT NULL, version BIGINT,
	PRIMARY KEY (consumer, partitionkey)
)`

// EnsureRecordTables creates the record handler's tables (safe when several
// processes do it at once), together with any extra statements, on db, the
// pool of an open store (sqlstore.EnsureTables).
func EnsureRecordTables(ctx context.Context, db *sql.DB, extra ...string) error {
	return sqlstore.EnsureTables(ctx, db, append(strings.Split(recordSchema, ";"), extra...)...)
}

// RecordHandler is the built-in handler of replay and demo: it writes one
// effect row per applied event and sets the object's state. It fails on
// purpose when data.fail is "transient" or "permanent".
func RecordHandler(consumer string) seqbox.Handler { return recordHandler(consumer, nil) }

// RecordHandlerOn is RecordHandler with its two statements prepared once
// on db (the pool the consumer's store uses), as a serious handler would:
// SQLite's driver parses every unprepared statement again.
func RecordHandlerOn(db *sql.DB, consumer string) seqbox.Handler {
	return recordHandler(consumer, &recordStmts{db: db})
}

const (
	insertEffect = `INSERT INTO record_effects (consumer, source, id, partitionkey, objectversion, type)
			VALUES ($1, $2, $3, $4, $5, $6)`
	upsertObject = `INSERT INTO record_objects (consumer, partitionkey, state, version)
			VALUES ($1, $2, $3, $4) ON CONFLICT (consumer, partitionkey) DO UPDATE SET state = excluded.state, version = excluded.version`
)

// recordStmts prepares the record handler's statements on first use.
type recordStmts struct {
	db             *sql.DB
	once           sync.Once
	effect, object *sql.Stmt
}

// exec runs q in tx, through its prepared statement when there is one.
func (r *recordStmts) exec(ctx context.Context, tx seqbox.Tx, q string, args ...any) error {
	if r != nil {
		r.once.Do(func() {
			// A failed prepare leaves the statement nil: it then runs
			// unprepared and meets its error there.
			r.effect, _ = r.db.PrepareContext(context.WithoutCancel(ctx), insertEffect)
			r.object, _ = r.db.PrepareContext(context.WithoutCancel(ctx), upsertObject)
		})
		st := r.effect
		if q == upsertObject {
			st = r.object
		}
		if stx, ok := tx.(*sql.Tx); ok && st != nil {
			_, err := stx.StmtContext(ctx, st).ExecContext(ctx, args...)
			return err
		}
	}
	_, err := tx.ExecContext(ctx, q, args...)
	return err
}

func recordHandler(consumer string, stmts *recordStmts) seqbox.Handler {
	return func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		if err := failOnPurpose(ev); err != nil {
			return err
		}
		if err := stmts.exec(ctx, tx, insertEffect, consumer, ev.Source, ev.ID, ev.PartitionKey, ev.ObjectVersion, ev.Type); err != nil {
			return fmt.Errorf("record effect: %w", err)
		}
		if ev.PartitionKey == "" {
			return nil
		}
		return stmts.exec(ctx, tx, upsertObject, consumer, ev.PartitionKey, ev.Type, ev.ObjectVersion)
	}
}

// failOnPurpose is the record handler's failure on request: data.fail
// "transient" is an error to retry, "permanent" one to dead-letter.
func failOnPurpose(ev seqboxtype.Event) error {
	var data struct {
		Fail string `json:"fail"`
	}
	_ = json.Unmarshal(ev.Data, &data)
	switch data.Fail {
	case "transient":
		return errors.New("record: data.fail=transient")
	case "permanent":
		return seqbox.Permanent(errors.New("record: data.fail=permanent"))
	}
	return nil
}

// Effects counts the consumer's effect rows.
func Effects(ctx context.Context, db *sql.DB, consumer string) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM record_effects WHERE consumer = $1`, consumer).Scan(&n)
	return n, err
}

// NewConsumer builds a consumer over cfg with the record handler, and
// registers it as such: the CLI may then drive it in-process (docs/design.md §9).
func NewConsumer(cfg seqbox.Config) (*seqbox.Consumer, error) {
	cfg.Handler = RecordHandler(cfg.Name)
	if cfg.Store != nil {
		cfg.Handler = RecordHandlerOn(cfg.Store.DB(), cfg.Name)
	}
	cfg.Store = own.Wrap(cfg.Store, own.Options{Record: true})
	return seqbox.NewConsumer(cfg)
}
