package embedded

import (
	"context"
	"database/sql"
	"strings"
)

// On SQLite the queue's schema marks each grouped message that has an
// earlier message of its group in the queue (behind = 1), and the
// receive and the idle look walk the order index's range of behind = 0
// in seq order: the groups' heads and the ungrouped messages. A look
// then costs what the heads in flight cost, not the backlog behind them.
// Before, it visited every visible message in seq order and looked up
// its group's predecessors; with every head leased (an agent's calls in
// flight, a slow handler) it walked the whole backlog for nothing, in
// the one writer's turn for a receive: at 200,000 messages in 200 groups
// a look took 550 ms and a receive 230 ms (docs/design.md §15.2,
// docs/benchmarks-history.md §43). PostgreSQL keeps the look-up
// (readyText): its writers run side by side, and keeping the mark right
// there needs locks of its own.
//
// The mark is kept by the schema itself, so that every writer of the
// table keeps it: a publish sets it (the insert computes it, and a
// trigger sets it for a row inserted without it, by a seqbox that knew
// nothing of the column), and a trigger clears it on the first
// remaining message of a group whenever a message of the group leaves,
// whoever deletes it (an ack, a tool, a chaos run). A message's group and
// seq never change, a new message's seq is above every message there,
// and the head is the group's lowest seq: so after any insert or delete
// each group's lowest message is its only one with behind = 0.

// ensureHeads adds the mark to a queue made before it (marking the
// waiting messages of each group), puts it in the order index as the
// walk's second column, and creates the triggers. Each step runs only
// when its object is missing: it runs on every open.
func ensureHeads(ctx context.Context, tx *sql.Tx) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('seqbox_queue') WHERE name = 'behind'`).Scan(&n); err != nil {
		return err
	}
	var stmts []string
	if n == 0 {
		stmts = append(stmts, `ALTER TABLE seqbox_queue ADD COLUMN behind INTEGER NOT NULL DEFAULT 0`,
			`UPDATE seqbox_queue SET behind = 1 WHERE msg_group <> '' AND EXISTS (SELECT 1 FROM seqbox_queue e
				WHERE e.queue = seqbox_queue.queue AND e.msg_group <> '' AND e.msg_group = seqbox_queue.msg_group AND e.seq < seqbox_queue.seq)`)
	}
	var def string
	if err := tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'seqbox_queue_order'`).Scan(&def); err != nil {
		return err
	}
	if !strings.Contains(def, "behind") {
		// The name stays: migration 002 creates the index only if it is
		// missing, and so leaves this one alone on every later open.
		stmts = append(stmts, `DROP INDEX seqbox_queue_order`,
			`CREATE INDEX seqbox_queue_order ON seqbox_queue (queue, behind, seq, visible_at)`)
	}
	stmts = append(stmts, headTriggers...)
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// headTriggers keep the mark for every writer of the table (ensureHeads).
var headTriggers = []string{
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
