package embedded

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/seqbox/seqbox/internal/pgdb"
)

// The queue's schema marks each grouped message that has an earlier
// message of its group in the queue (behind = 1), and the receive and
// the idle look walk the order index's range of behind = 0 in seq
// order: the groups' heads and the ungrouped messages (headText). A look
// then costs what the heads in flight cost, not the backlog behind them.
// Before, it visited every visible message in seq order and looked up
// its group's predecessors; with every head leased (an agent's calls in
// flight, a slow handler) it walked the whole backlog for nothing, in
// the one writer's turn for a receive on SQLite: at 200,000 messages in
// 200 groups a look took 550 ms and a receive 230 ms there, and a look
// 88 ms at 20,000 on PostgreSQL (docs/design.md §15.2,
// docs/benchmarks-history.md §43).
//
// The mark is kept by the schema itself, so that every writer of the
// table keeps it: the insert computes it (a trigger on PostgreSQL; on
// SQLite the insert, and a trigger for a row inserted without it, by a
// seqbox that knew nothing of the column), and a trigger clears it on
// the first remaining message of a group whenever a message of the
// group leaves, whoever deletes it (an ack, a tool, a chaos run). A
// message's group never changes; the head is the group's lowest seq
// among the messages there, and a message published while others of its
// group are there is behind them.
//
// On PostgreSQL, writers run side by side: a publish that saw the head
// and an ack that did not see the publish would leave the new message
// marked for good, with nothing ahead of it. So both take a lock of the
// group (a transaction-level advisory lock, pgdb.QueueGroupLock) before they look,
// and look with a snapshot taken after it: the second of the two sees
// the first's commit. A statement that touches several groups takes
// their locks first, in one order (pgdb.LockQueueGroups), so that two
// such statements never wait for each other in a circle.
//
// A grouped row's seq is drawn again under its group's lock, so that a
// group's messages are in seq order as they took the lock, which is the
// order they commit in: the head is the group's lowest seq there, as the
// receive of a seqbox from before the mark and TakeNext take it. (The
// default seq is drawn before a row's triggers run: a row of another
// writer that waited for the lock would otherwise have a seq below the
// head's.) And the triggers refuse to run outside READ COMMITTED: at a
// stricter level a statement's snapshot is older than its wait for the
// lock, and a trigger would miss the commit it waited for, leaving a
// group with no head (seqbox's connections set it, pgdb).

// ensureHeads adds the mark to a queue made before it (marking the
// waiting messages of each group) and creates what keeps it. Each step
// runs only when its object is missing, or replaces it with the same
// text: it runs on every open. The order index that walks the mark is
// ensureHeadsIndex's (SQLite) and ensureHOT's (PostgreSQL).
func ensureHeads(ctx context.Context, tx *sql.Tx, d dialect.SQL) error {
	has, err := hasColumn(ctx, tx, d, "behind")
	if err != nil {
		return err
	}
	var stmts []string
	if !has {
		stmts = append(stmts, `ALTER TABLE seqbox_queue ADD COLUMN behind INTEGER NOT NULL DEFAULT 0`,
			`UPDATE seqbox_queue SET behind = 1 WHERE msg_group <> '' AND EXISTS (SELECT 1 FROM seqbox_queue e
				WHERE e.queue = seqbox_queue.queue AND e.msg_group <> '' AND e.msg_group = seqbox_queue.msg_group AND e.seq < seqbox_queue.seq)`)
	}
	if d == dialect.Postgres {
		var schema string
		if err := tx.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			return err
		}
		more, err := postgresHeadTriggers(ctx, tx, pgdb.QuoteIdent(schema))
		if err != nil {
			return err
		}
		stmts = append(stmts, more...)
	} else {
		stmts = append(stmts, sqliteHeadTriggers...)
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	if d == dialect.SQLite {
		return ensureHeadsIndex(ctx, tx)
	}
	return nil
}

// ensureHeadsIndex (SQLite) makes the order index the walk of the heads:
// (queue, behind, seq, visible_at). The name stays: migration 002
// creates the index only if it is missing, and so leaves this one alone
// on every later open.
func ensureHeadsIndex(ctx context.Context, tx *sql.Tx) error {
	var def string
	if err := tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'seqbox_queue_order'`).Scan(&def); err != nil {
		return err
	}
	if strings.Contains(def, "behind") {
		return nil
	}
	for _, stmt := range []string{`DROP INDEX seqbox_queue_order`,
		`CREATE INDEX seqbox_queue_order ON seqbox_queue (queue, behind, seq, visible_at)`} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// sqliteHeadTriggers keep the mark for every writer of the table: SQLite
// runs one write transaction at a time, so a trigger's look sees every
// other writer's commit.
var sqliteHeadTriggers = []string{
	`CREATE TRIGGER IF NOT EXISTS seqbox_queue_behind_insert AFTER INSERT ON seqbox_queue
	WHEN NEW.msg_group <> '' AND NEW.behind = 0
	BEGIN
		UPDATE seqbox_queue SET behind = 1 WHERE seq = NEW.seq AND EXISTS (SELECT 1 FROM seqbox_queue e
			WHERE e.queue = NEW.queue AND e.msg_group <> '' AND e.msg_group = NEW.msg_group AND e.seq < NEW.seq);
	END`,
	`CREATE TRIGGER IF NOT EXISTS seqbox_queue_behind_delete AFTER DELETE ON seqbox_queue
	WHEN OLD.msg_group <> ''
	BEGIN
		UPDATE seqbox_queue SET behind = 0 WHERE behind = 1 AND seq = (SELECT MIN(m.seq) FROM seqbox_queue m
			WHERE m.queue = OLD.queue AND m.msg_group <> '' AND m.msg_group = OLD.msg_group);
	END`,
}

// postgresHeadTriggers are the statements that make PostgreSQL's
// triggers, the functions in schema (quoted): the functions are
// replaced with the same text on every open, the triggers created when
// missing. A function's statements each take a snapshot of their own
// (they are VOLATILE), after its group lock.
func postgresHeadTriggers(ctx context.Context, tx *sql.Tx, schema string) ([]string, error) {
	var seq string
	if err := tx.QueryRowContext(ctx, `SELECT pg_get_serial_sequence(current_schema() || '.seqbox_queue', 'seq')`).Scan(&seq); err != nil {
		return nil, err
	}
	guard := `IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'seqbox: the embedded queue''s message groups need READ COMMITTED transactions; this one is %%',
			current_setting('transaction_isolation');
	END IF;
	PERFORM ` + pgdb.QueueGroupLock("%[2]s.queue", "%[2]s.msg_group") + `;`
	insert := fmt.Sprintf(`CREATE OR REPLACE FUNCTION %[1]s.seqbox_queue_behind_insert() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	`+guard+`
	NEW.seq := nextval(%[3]s::regclass);
	NEW.behind := CASE WHEN EXISTS (SELECT 1 FROM %[1]s.seqbox_queue e
		WHERE e.queue = NEW.queue AND e.msg_group <> '' AND e.msg_group = NEW.msg_group) THEN 1 ELSE 0 END;
	RETURN NEW;
END $f$`, schema, "NEW", pgdb.QuoteLiteral(seq))
	del := fmt.Sprintf(`CREATE OR REPLACE FUNCTION %[1]s.seqbox_queue_behind_delete() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	`+guard+`
	UPDATE %[1]s.seqbox_queue SET behind = 0 WHERE behind = 1 AND seq = (SELECT min(m.seq) FROM %[1]s.seqbox_queue m
		WHERE m.queue = OLD.queue AND m.msg_group <> '' AND m.msg_group = OLD.msg_group);
	RETURN NULL;
END $f$`, schema, "OLD")
	stmts := []string{insert, del}
	for _, t := range []struct{ name, when string }{
		{"seqbox_queue_behind_insert", "BEFORE INSERT ON seqbox_queue FOR EACH ROW WHEN (NEW.msg_group <> '')"},
		{"seqbox_queue_behind_delete", "AFTER DELETE ON seqbox_queue FOR EACH ROW WHEN (OLD.msg_group <> '')"},
	} {
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger
			WHERE tgrelid = 'seqbox_queue'::regclass AND tgname = $1)`, t.name).Scan(&exists); err != nil {
			return nil, err
		}
		if !exists {
			stmts = append(stmts, fmt.Sprintf(`CREATE TRIGGER %s %s EXECUTE FUNCTION %s.%s()`, t.name, t.when, schema, t.name))
		}
	}
	return stmts, nil
}
