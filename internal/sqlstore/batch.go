package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/seqbox/seqbox/store"
)

// maxChunk bounds the rows of one multi-row statement. A batch is cut
// into chunks whose sizes are powers of two, so each statement has at most
// eight texts and all of them stay prepared.
const maxChunk = 128

// eachChunk calls fn with consecutive chunks of n rows, largest first.
func eachChunk(n int, fn func(lo, hi int) error) error {
	for lo := 0; lo < n; {
		size := maxChunk
		for size > n-lo {
			size /= 2
		}
		if err := fn(lo, lo+size); err != nil {
			return err
		}
		lo += size
	}
	return nil
}

// texts caches the statement text of each (template, rows) pair.
var texts sync.Map

// rowsText expands a template holding {{ROWS}} into rows groups of
// placeholders. row is one group written with $a, $b, … for its columns,
// which are numbered after the first fixed parameters ($1 … $first, which
// a group may also name); every {{ROWS}} gets the same groups.
func rowsText(template, row string, first, rows int) string {
	type k struct {
		t    string
		rows int
	}
	if v, ok := texts.Load(k{template, rows}); ok {
		return v.(string)
	}
	cols := 0
	for strings.Contains(row, "$"+string(rune('a'+cols))) {
		cols++
	}
	groups := make([]string, rows)
	for r := range rows {
		g := row
		for c := range cols {
			g = strings.Replace(g, "$"+string(rune('a'+c)), "$"+strconv.Itoa(first+1+r*cols+c), 1)
		}
		groups[r] = g
	}
	s := strings.ReplaceAll(template, "{{ROWS}}", strings.Join(groups, ", "))
	texts.Store(k{template, rows}, s)
	return s
}

// KeyLockMany reads and locks the keys that exist, in byte order of the key
// (the lock order every batch uses), with whether anything is parked or
// retrying on each. On PostgreSQL the flags are read after the locks are
// granted, as Key explains.
func (t *Executor) KeyLockMany(ctx context.Context, p store.KeyLockManyParams) (map[string]store.KeyState, error) {
	consumer, keys := p.Consumer, sortedUnique(p.Keys)
	out := make(map[string]store.KeyState, len(keys))
	if t.arrays && len(keys) > 0 {
		return out, t.keyLockManyArrays(ctx, consumer, keys, out)
	}
	err := eachChunk(len(keys), func(lo, hi int) error {
		args := append([]any{consumer}, anys(keys[lo:hi])...)
		if t.lockRow == "" {
			return t.run(ctx, keysRead(rowsText(`SELECT `+keyColumns+`,
				CASE WHEN EXISTS (SELECT 1 FROM seqbox_parked p WHERE p.consumer = k.consumer AND p.partitionkey = k.partitionkey) THEN 1 ELSE 0 END,
				CASE WHEN EXISTS (SELECT 1 FROM seqbox_retries r WHERE r.consumer = k.consumer AND r.partitionkey = k.partitionkey) THEN 1 ELSE 0 END
				FROM seqbox_keys k WHERE consumer = $1 AND partitionkey IN ({{ROWS}})`, "$a", 1, hi-lo), args, out, true))
		}
		return t.run(ctx,
			keysRead(rowsText(`SELECT `+keyColumns+` FROM seqbox_keys
			WHERE consumer = $1 AND partitionkey IN ({{ROWS}}) ORDER BY partitionkey COLLATE "C"`+t.lockRow, "$a", 1, hi-lo), args, out, false),
			flagsRead(rowsText(`SELECT partitionkey, 'p' FROM seqbox_parked WHERE consumer = $1 AND partitionkey IN ({{ROWS}})
			UNION SELECT partitionkey, 'r' FROM seqbox_retries WHERE consumer = $1 AND partitionkey IN ({{ROWS}})`, "$a", 1, hi-lo), args, out))
	})
	return out, err
}

// flagsRead is the statement q, which returns (key, 'p' or 'r') rows, read
// into the parked and retrying flags of the keys out holds.
func flagsRead(q string, args []any, out map[string]store.KeyState) store.Statement {
	return store.Statement{Query: q, Args: args, Read: func(rows store.Rows) error { return readFlags(rows, out) }}
}

// readFlags reads (key, 'p' or 'r') rows into the parked and retrying
// flags of the keys out holds.
func readFlags(rows store.Rows, out map[string]store.KeyState) error {
	for rows.Next() {
		var key, what string
		if err := rows.Scan(&key, &what); err != nil {
			return err
		}
		ks, ok := out[key]
		if !ok {
			continue
		}
		ks.HasParked = ks.HasParked || what == "p"
		ks.HasRetries = ks.HasRetries || what == "r"
		out[key] = ks
	}
	return rows.Err()
}

// keysRead is the statement q, which returns key rows (with the two flag
// columns when flags), read into out.
func keysRead(q string, args []any, out map[string]store.KeyState, flags bool) store.Statement {
	return store.Statement{Query: q, Args: args, Read: func(rows store.Rows) error { return readKeys(rows, out, flags) }}
}

// readKeys reads key rows into out, with the two flag columns when flags.
func readKeys(rows store.Rows, out map[string]store.KeyState, flags bool) error {
	for rows.Next() {
		var parked, retries int
		var row interface{ Scan(...any) error } = rows
		if flags {
			row = extraColumns{rows, []any{&parked, &retries}}
		}
		ks, err := scanKey(row)
		if err != nil {
			return err
		}
		ks.HasParked, ks.HasRetries = parked != 0, retries != 0
		out[ks.Key] = ks
	}
	return rows.Err()
}

// KeyEnsureMany creates the missing key rows.
func (t *Executor) KeyEnsureMany(ctx context.Context, p store.KeyEnsureManyParams) error {
	consumer, keys, at := p.Consumer, p.Keys, p.At
	if t.arrays && len(keys) > 0 {
		return t.keyEnsureManyArrays(ctx, consumer, keys, at)
	}
	return eachChunk(len(keys), func(lo, hi int) error {
		_, err := t.exec(ctx, rowsText(`INSERT INTO seqbox_keys (consumer, partitionkey, updated_at)
			VALUES {{ROWS}} ON CONFLICT (consumer, partitionkey) DO NOTHING`, "($1, $a, $2)", 2, hi-lo),
			append([]any{consumer, micros(at)}, anys(keys[lo:hi])...)...)
		return err
	})
}

// InboxInsertMany inserts identities in multi-row statements; the primary
// key decides, and RETURNING names the rows that went in.
func (t *Executor) InboxInsertMany(ctx context.Context, rs []store.InboxRow) ([]bool, error) {
	inserted := make([]bool, len(rs))
	if t.arrays && len(rs) > 0 {
		return inserted, t.run(ctx, inboxInsertArrays(rs, inserted))
	}
	err := eachChunk(len(rs), func(lo, hi int) error {
		args := make([]any, 0, (hi-lo)*16)
		for _, r := range rs[lo:hi] {
			args = append(args, r.Consumer, r.Source, r.ID, r.PayloadHash, r.BusinessKey, r.EventType, r.Tenant,
				r.ContractVersion, r.PartitionKey, optInt(r.ObjectVersion), r.Outcome, micros(r.ReceivedAt),
				optMicros(r.ProcessedAt), r.ResultReference, micros(r.RetentionUntil), r.CausationID)
		}
		if t.tx != nil {
			all, err := t.insertedAll(ctx, rowsText(inboxInsertValues, inboxInsertRow, 0, hi-lo), args, hi-lo)
			if err != nil {
				return err
			}
			if all {
				for i := lo; i < hi; i++ {
					inserted[i] = true
				}
				return nil
			}
		}
		at := make(map[rowIdentity]int, hi-lo)
		for i, r := range rs[lo:hi] {
			at[rowIdentity{r.Consumer, r.Source, r.ID}] = lo + i
		}
		return t.run(ctx, insertedRead(rowsText(inboxInsertValues+" RETURNING consumer, source, id", inboxInsertRow, 0, hi-lo),
			args, at, inserted))
	})
	return inserted, err
}

// The inbox's multi-row insert (rowsText): rows that are there already
// are left alone.
const (
	inboxInsertValues = `INSERT INTO seqbox_inbox
			(consumer, source, id, payload_hash, businesskey, event_type, tenant, contract_version,
			 partitionkey, objectversion, outcome, received_at, processed_at, result_reference, retention_until, causation)
			VALUES {{ROWS}} ON CONFLICT (consumer, source, id) DO NOTHING`
	inboxInsertRow = "($a, $b, $c, $d, $e, $f, $g, $h, $i, $j, $k, $l, $m, $n, $o, $p)"
)

// insertedAll runs the insert q of n rows and reports whether it
// inserted every one, the common case: a batch of new identities. Else
// it undoes the insert (a savepoint) so that the caller runs it again
// with RETURNING, to learn which rows were there before: the common case
// reads no rows back, a large part of the insert's cost on SQLite
// (docs/benchmarks-history.md §16). Only in a transaction: the savepoint
// must stay on one connection.
func (t *Executor) insertedAll(ctx context.Context, q string, args []any, n int) (bool, error) {
	if _, err := t.exec(ctx, "SAVEPOINT seqbox_inbox_insert"); err != nil {
		return false, err
	}
	res, err := t.exec(ctx, q, args...)
	var got int64
	if err == nil {
		got, err = res.RowsAffected()
	}
	if err != nil {
		return false, err
	}
	if got != int64(n) {
		if _, err := t.exec(ctx, "ROLLBACK TO SAVEPOINT seqbox_inbox_insert"); err != nil {
			return false, err
		}
	}
	_, err = t.exec(ctx, "RELEASE SAVEPOINT seqbox_inbox_insert")
	return err == nil && got == int64(n), err
}

// rowIdentity is an inbox row's primary key.
type rowIdentity struct{ consumer, source, id string }

// insertedRead is the INSERT … RETURNING q of the rows whose indexes at
// holds, its identities read into inserted (markInserted).
func insertedRead(q string, args []any, at map[rowIdentity]int, inserted []bool) store.Statement {
	return store.Statement{Query: q, Args: args, Read: func(rows store.Rows) error { return markInserted(rows, at, inserted) }}
}

// markInserted reads the identities an INSERT … RETURNING returned and
// marks each one's index (at) in inserted.
func markInserted(rows store.Rows, at map[rowIdentity]int, inserted []bool) error {
	for rows.Next() {
		var k rowIdentity
		if err := rows.Scan(&k.consumer, &k.source, &k.id); err != nil {
			return err
		}
		if i, ok := at[k]; ok {
			inserted[i] = true
		}
	}
	return rows.Err()
}

// InboxSetOutcomeMany records many outcomes, one prepared statement each:
// the pipeline records most outcomes when it inserts the identity, so
// these are few.
func (t *Executor) InboxSetOutcomeMany(ctx context.Context, p store.InboxSetOutcomeManyParams) error {
	consumer, rs := p.Consumer, p.Rows
	for _, r := range rs {
		if err := t.InboxSetOutcome(ctx, store.InboxSetOutcomeParams{Consumer: consumer, Source: r.Source, ID: r.ID, Outcome: r.Outcome,
			ProcessedAt: r.ProcessedAt, ResultReference: r.ResultReference}); err != nil {
			return err
		}
	}
	return nil
}

// KeyAdvanceMany runs many key compare-and-sets, a chunk per statement. The
// keys are named in an IN list, so that every database probes the key
// index once per key rather than join the whole consumer's keys.
func (t *Executor) KeyAdvanceMany(ctx context.Context, p store.KeyAdvanceManyParams) (int, error) {
	if t.arrays && len(p.Moves) > 0 {
		return t.keyAdvanceArrays(ctx, p)
	}
	consumer, moves, at := p.Consumer, p.Moves, p.At
	won := 0
	err := eachChunk(len(moves), func(lo, hi int) error {
		args := []any{consumer, micros(at)}
		for _, m := range moves[lo:hi] {
			prev := int64(-1)
			if m.Prev != nil {
				prev = *m.Prev
			}
			args = append(args, m.Key, prev, m.Next)
		}
		res, err := t.exec(ctx, advanceText(hi-lo), args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		won += int(n)
		return err
	})
	return won, err
}

// advanceText is AdvanceKeys' statement for n moves: parameters $1
// consumer, $2 time, then key, prev, next per move.
func advanceText(n int) string {
	type k struct{ n int }
	if v, ok := texts.Load(k{n}); ok {
		return v.(string)
	}
	var keys, prev, next strings.Builder
	for i := range n {
		key, p, x := 3+3*i, 4+3*i, 5+3*i
		if i > 0 {
			keys.WriteString(", ")
		}
		fmt.Fprintf(&keys, "$%d", key)
		fmt.Fprintf(&prev, " WHEN $%d THEN CAST($%d AS BIGINT)", key, p)
		fmt.Fprintf(&next, " WHEN $%d THEN CAST($%d AS BIGINT)", key, x)
	}
	s := `UPDATE seqbox_keys SET version = CASE partitionkey` + next.String() + ` END, updated_at = $2,
		baseline = COALESCE(baseline, CASE partitionkey` + next.String() + ` END)
		WHERE consumer = $1 AND partitionkey IN (` + keys.String() + `)
			AND COALESCE(version, -1) = CASE partitionkey` + prev.String() + ` END`
	texts.Store(k{n}, s)
	return s
}

// InboxGetMany reads many identities, a primary-key term each (as
// RetryClearMany names them).
func (t *Executor) InboxGetMany(ctx context.Context, p store.InboxGetManyParams) (map[store.Identity]store.InboxRow, error) {
	out := make(map[store.Identity]store.InboxRow, len(p.IDs))
	if len(p.IDs) == 0 {
		return out, nil
	}
	if t.arrays {
		return out, t.inboxGetArrays(ctx, p, out)
	}
	err := eachChunk(len(p.IDs), func(lo, hi int) error {
		args := []any{p.Consumer}
		for _, id := range p.IDs[lo:hi] {
			args = append(args, id.Source, id.ID)
		}
		rows, err := t.query(ctx, orText(`SELECT `+inboxColumns+`, source, id FROM seqbox_inbox WHERE {{ROWS}}`, hi-lo), args...)
		if err != nil {
			return err
		}
		return scanInboxRows(rows, p.Consumer, out)
	})
	return out, err
}

// scanInboxRows reads rows of (inboxColumns, source, id) into out; it
// closes rows.
func scanInboxRows(rows *sql.Rows, consumer string, out map[store.Identity]store.InboxRow) error {
	defer rows.Close()
	for rows.Next() {
		r := store.InboxRow{Consumer: consumer}
		if err := scanInbox(extraColumns{rows, []any{&r.Source, &r.ID}}, &r); err != nil {
			return err
		}
		out[store.Identity{Source: r.Source, ID: r.ID}] = r
	}
	return rows.Err()
}

// RetryClearMany forgets the attempts of many identities.
func (t *Executor) RetryClearMany(ctx context.Context, p store.RetryClearManyParams) error {
	return t.deleteMany(ctx, "seqbox_retries", p.Consumer, p.IDs)
}

// InboxDeleteMany forgets many identities.
func (t *Executor) InboxDeleteMany(ctx context.Context, p store.IdentitiesRef) error {
	return t.deleteMany(ctx, "seqbox_inbox", p.Consumer, p.IDs)
}

// deleteManyArrays is deleteMany's statement with arrays of identities.
func deleteManyArrays(table, consumer string, ids []store.Identity) store.Statement {
	sources, names := make([]string, len(ids)), make([]string, len(ids))
	for i, id := range ids {
		sources[i], names[i] = id.Source, id.ID
	}
	return store.Statement{Query: `DELETE FROM ` + table + ` r USING unnest($2::text[], $3::text[]) AS u(s, i)
			WHERE r.consumer = $1 AND r.source = u.s AND r.id = u.i`, Args: []any{consumer, sources, names}}
}

// deleteMany deletes the rows of many identities from table: one
// statement with arrays on PostgreSQL, else chunks in which each identity
// is a primary-key term of its own (OR), which both databases answer from
// the primary key.
func (t *Executor) deleteMany(ctx context.Context, table, consumer string, ids []store.Identity) error {
	if len(ids) == 0 {
		return nil
	}
	if t.arrays {
		return t.run(ctx, deleteManyArrays(table, consumer, ids))
	}
	return eachChunk(len(ids), func(lo, hi int) error {
		args := []any{consumer}
		for _, id := range ids[lo:hi] {
			args = append(args, id.Source, id.ID)
		}
		_, err := t.exec(ctx, orText(`DELETE FROM `+table+` WHERE {{ROWS}}`, hi-lo), args...)
		return err
	})
}

// orText expands {{ROWS}} into n primary-key terms "(consumer = $1 AND
// source = $a AND id = $b)" joined by OR, numbered after $1.
func orText(template string, n int) string {
	type k struct {
		t string
		n int
	}
	if v, ok := texts.Load(k{template, n}); ok {
		return v.(string)
	}
	s := strings.Replace(rowsText(template, "(consumer = $1 AND source = $a AND id = $b)", 1, n), "), (", ") OR (", n-1)
	texts.Store(k{template, n}, s)
	return s
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
