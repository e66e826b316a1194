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
	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/seqboxtype"
)

// recordSchema is the record handler's business tables: one effect row per
// applied event, and the object state (the applied event's type at its
// version).
//
// n is the effect's position: an auto-increment, so within one key (whose
// transactions the version gate serializes) it is the commit order.
const recordSchema = `CREATE TABLE IF NOT EXISTS seqbox_record_effects (
	n {{SERIAL}}, consumer TEXT NOT NULL, source TEXT NOT NULL, id TEXT NOT NULL,
	partitionkey TEXT NOT NULL, objectversion BIGINT, type TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS seqbox_record_objects (
	consumer TEXT NOT NULL, partitionkey TEXT NOT NULL, state TEXT NOT NULL, version BIGINT,
	PRIMARY KEY (consumer, partitionkey)
)`

// EnsureRecordTables creates the record handler's tables (safe when several
// processes do it at once), together with any extra statements, on db, the
// pool of an open store (sqlstore.EnsureTables).
//
// The tables are seqbox_ tables (DESIGN: seqbox creates only its own
// objects); an older seqbox named them record_effects and record_objects,
// and such a pair, with exactly the columns it made, is renamed first. A
// table of those names that is not seqbox's is left alone.
func EnsureRecordTables(ctx context.Context, db *sql.DB, extra ...string) error {
	return sqlstore.EnsureTablesAfter(ctx, db, renameLegacyRecordTables, append(strings.Split(recordSchema, ";"), extra...)...)
}

// legacyRecordTables are the record handler's tables as an older seqbox
// named them, with their columns, and their names now.
var legacyRecordTables = []struct {
	old, now string
	columns  []string
}{
	{"record_effects", "seqbox_record_effects", []string{"consumer", "id", "n", "objectversion", "partitionkey", "source", "type"}},
	{"record_objects", "seqbox_record_objects", []string{"consumer", "partitionkey", "state", "version"}},
}

// renameLegacyRecordTables renames an older seqbox's record tables to
// their seqbox_ names (on PostgreSQL, into seqbox's schema, from the
// connection's, where the older seqbox made them): only a table with
// exactly the columns seqbox made, and only when its new name is free.
func renameLegacyRecordTables(ctx context.Context, tx *sql.Tx, schema string) error {
	postgres := schema != ""
	columnsOf := `SELECT name FROM pragma_table_info(?) ORDER BY name`
	if postgres {
		columnsOf = `SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attname`
	}
	columns := func(table string) ([]string, error) {
		rows, err := tx.QueryContext(ctx, columnsOf, table)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, rows.Err()
	}
	for _, l := range legacyRecordTables {
		old, err := columns(l.old)
		if err != nil {
			return fmt.Errorf("read %s: %w", l.old, err)
		}
		now, err := columns(l.now)
		if err != nil {
			return fmt.Errorf("read %s: %w", l.now, err)
		}
		if len(now) > 0 || strings.Join(old, ",") != strings.Join(l.columns, ",") {
			continue
		}
		if _, err := tx.ExecContext(ctx, `ALTER TABLE `+l.old+` RENAME TO `+l.now); err != nil {
			return fmt.Errorf("rename %s: %w", l.old, err)
		}
		if postgres {
			// Into seqbox's schema, where the record tables are made now:
			// left in the application's, it would hide seqbox's there.
			if _, err := tx.ExecContext(ctx, `ALTER TABLE `+l.now+` SET SCHEMA `+pgdb.QuoteIdent(schema)); err != nil {
				return fmt.Errorf("move %s into schema %s: %w", l.now, schema, err)
			}
		}
	}
	return nil
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
	insertEffect = `INSERT INTO seqbox_record_effects (consumer, source, id, partitionkey, objectversion, type)
			VALUES ($1, $2, $3, $4, $5, $6)`
	upsertObject = `INSERT INTO seqbox_record_objects (consumer, partitionkey, state, version)
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
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_record_effects WHERE consumer = $1`, consumer).Scan(&n)
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
