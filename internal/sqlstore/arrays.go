package sqlstore

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seqbox/seqbox/store"
)

// On PostgreSQL (Dialect.Arrays) the set-based operations of a batch
// take each column as one array parameter and read it back with unnest
// or = ANY: a batch's rows are one statement of one text, one round trip,
// whatever their number, where the multi-row VALUES of batch.go need a
// statement per power-of-two chunk. The SQL decides exactly as the
// multi-row statements do (same conflicts, same compare-and-set, same
// lock order).
//
// The keys' rows and the decisions, tables that grow with the keys and
// the events, are looked up by the batch's keys or identities as a probe
// of the table's key per element (probeKeys, probeIDs): a nested loop
// over the arrays whose inner side is a subquery on the whole key, kept
// from being merged into a join (FOR UPDATE, LIMIT). A join or an = ANY
// left to the planner was planned from statistics a new store's tables
// lack until autovacuum's first ANALYZE, and pgx's prepared statements
// keep the plan made then: it took `consumer = $1` (every row of a store
// with one consumer) for a handful of rows, and read all of the
// consumer's rows per statement, with a filter or a hash join, a cost
// that grew with the table (5.6 ms a batch for the keys' lock at 5,000
// keys). Each of these tables has no index but its key, so the probe is
// the only plan an index offers, with statistics or without
// (TestKeyProbesUseTheKeyWhateverTheStatistics). The turns, the parked
// messages and the inbox have other indexes that also begin with the
// consumer; with no statistics the planner may probe one of those by the
// consumer alone, so they keep the join. For the turns and the parked
// messages its cost is bounded by their size (the keys in flight); for
// the inbox's reads by identity (re-sends, the stopped messages' rows)
// it is not, until the first ANALYZE.

// probeKeys is a FROM list of the keys in the array $2, each with the
// rows of sub (a SELECT that names the key u.key) as f.
func probeKeys(sub string) string {
	return ` FROM unnest($2::text[]) AS u(key) CROSS JOIN LATERAL (` + sub + `) f`
}

// probeIDs is a FROM list of the identities in the arrays $2 (sources)
// and $3 (ids), each with the rows of sub (a SELECT that names them u.s
// and u.i) as f.
func probeIDs(sub string) string {
	return ` FROM unnest($2::text[], $3::text[]) AS u(s, i) CROSS JOIN LATERAL (` + sub + `) f`
}

// keyLockManyArrays is KeyLockMany in two statements: the key rows, locked
// in byte order, then the parked and retrying flags, read after the locks
// are granted (see KeyLock). In a transaction that pipelines they go
// together: the flags' statement starts, with its own snapshot, once the
// locks' statement has finished.
func (t *Executor) keyLockManyArrays(ctx context.Context, consumer string, keys []string, out map[string]store.KeyState) error {
	lock, flags := keyLockArrays(consumer, keys, t.lockRow, out)
	if t.pipeline != nil {
		return t.run(ctx, lock, flags)
	}
	if err := t.run(ctx, lock); err != nil || len(out) == 0 {
		return err
	}
	return t.run(ctx, flags)
}

// keyLockArrays are keyLockManyArrays' two statements, read into out.
func keyLockArrays(consumer string, keys []string, lockRow string, out map[string]store.KeyState) (lock, flags store.Statement) {
	args := []any{consumer, keys}
	// keys is sorted (byte order): the probes lock the rows in its order.
	return keysRead(`SELECT f.*`+probeKeys(`SELECT `+keyColumns+` FROM seqbox_keys WHERE consumer = $1 AND partitionkey = u.key`+lockRow), args, out, false),
		flagsRead(`SELECT partitionkey, 'p' FROM seqbox_parked WHERE consumer = $1 AND partitionkey = ANY($2::text[])
		UNION SELECT partitionkey, 'r' FROM seqbox_retries WHERE consumer = $1 AND partitionkey = ANY($2::text[])`, args, out)
}

// KeyLockInsertMany is KeyLockMany then InboxInsertMany, then the
// statements then (store.Pipeliner): in a transaction that pipelines, one
// round trip for the keys' locks, their flags, the identities and then,
// each statement run once the one before it has finished, as one by one.
func (t *Executor) KeyLockInsertMany(ctx context.Context, p store.KeyLockManyParams, rows []store.InboxRow, then ...store.Statement) (map[string]store.KeyState, []bool, error) {
	if t.pipeline == nil || !t.arrays {
		keys, err := t.KeyLockMany(ctx, p)
		if err != nil {
			return nil, nil, err
		}
		inserted, err := t.InboxInsertMany(ctx, rows)
		if err != nil {
			return nil, nil, err
		}
		return keys, inserted, t.run(ctx, then...)
	}
	keys, out := sortedUnique(p.Keys), map[string]store.KeyState{}
	inserted := make([]bool, len(rows))
	var stmts []store.Statement
	if len(keys) > 0 {
		lock, flags := keyLockArrays(p.Consumer, keys, t.lockRow, out)
		stmts = append(stmts, lock, flags)
	}
	if len(rows) > 0 {
		stmts = append(stmts, inboxInsertArrays(rows, inserted))
	}
	stmts = append(stmts, then...)
	if err := t.run(ctx, stmts...); err != nil {
		return nil, nil, err
	}
	return out, inserted, nil
}

// keyEnsureManyArrays is KeyEnsureMany in one statement.
func (t *Executor) keyEnsureManyArrays(ctx context.Context, consumer string, keys []string, at time.Time) error {
	_, err := t.exec(ctx, `INSERT INTO seqbox_keys (consumer, partitionkey, updated_at)
		SELECT $1, k, $2 FROM unnest($3::text[]) WITH ORDINALITY AS u(k, n) ORDER BY n
		ON CONFLICT (consumer, partitionkey) DO NOTHING`, consumer, micros(at), keys)
	return err
}

// inboxInsertArrays is InboxInsertMany in one statement, the rows
// inserted in their order; it marks in inserted the rows that went in.
func inboxInsertArrays(rs []store.InboxRow, inserted []bool) store.Statement {
	n := len(rs)
	consumer, source, id, hash := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	bkey, etype, tenant, contract, pkey := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	outcome, ref, causation := make([]string, n), make([]string, n), make([]string, n)
	version, processed := make([]*int64, n), make([]*int64, n)
	received, retention := make([]int64, n), make([]int64, n)
	at := make(map[rowIdentity]int, n)
	for i, r := range rs {
		consumer[i], source[i], id[i], hash[i] = r.Consumer, r.Source, r.ID, r.PayloadHash
		bkey[i], etype[i], tenant[i], contract[i], pkey[i] = r.BusinessKey, r.EventType, r.Tenant, r.ContractVersion, r.PartitionKey
		outcome[i], ref[i], causation[i] = string(r.Outcome), r.ResultReference, r.CausationID
		version[i] = r.ObjectVersion
		if r.ProcessedAt != nil {
			p := micros(*r.ProcessedAt)
			processed[i] = &p
		}
		received[i], retention[i] = micros(r.ReceivedAt), micros(r.RetentionUntil)
		at[rowIdentity{r.Consumer, r.Source, r.ID}] = i
	}
	cols := []arrayColumn{
		textColumn("consumer", consumer), textColumn("source", source), textColumn("id", id), textColumn("payload_hash", hash),
		textColumn("businesskey", bkey), textColumn("event_type", etype), textColumn("tenant", tenant),
		textColumn("contract_version", contract), textColumn("partitionkey", pkey), optIntColumn("objectversion", version),
		textColumn("outcome", outcome), intColumn("received_at", received), optIntColumn("processed_at", processed),
		textColumn("result_reference", ref), intColumn("retention_until", retention), textColumn("causation", causation),
	}
	q, args := insertFromArrays("seqbox_inbox", cols, " ON CONFLICT (consumer, source, id) DO NOTHING RETURNING consumer, source, id")
	return insertedRead(q, args, at, inserted)
}

// arrayColumn is one column of a multi-row insert from arrays
// (insertFromArrays): its values, one per row, and, when every row holds
// the same one, that value alone.
type arrayColumn struct {
	name, typ string
	values    any
	uniform   bool
	value     any
}

func textColumn(name string, vs []string) arrayColumn { return valueColumn(name, "text", vs) }

func intColumn(name string, vs []int64) arrayColumn { return valueColumn(name, "bigint", vs) }

func valueColumn[T comparable](name, typ string, vs []T) arrayColumn {
	c := arrayColumn{name: name, typ: typ, values: vs, uniform: len(vs) > 0}
	for _, v := range vs {
		c.uniform = c.uniform && v == vs[0]
	}
	if c.uniform {
		c.value = vs[0]
	}
	return c
}

func optIntColumn(name string, vs []*int64) arrayColumn {
	c := arrayColumn{name: name, typ: "bigint", values: vs, uniform: len(vs) > 0}
	for _, v := range vs {
		c.uniform = c.uniform && (v == nil) == (vs[0] == nil) && (v == nil || *v == *vs[0])
	}
	if c.uniform {
		c.value = vs[0]
	}
	return c
}

// arrayTexts caches insertFromArrays' statement text per table, columns
// and uniform ones.
var arrayTexts sync.Map

// insertFromArrays is an INSERT of cols into table, one row per array
// element in the arrays' order, then tail. A column whose rows all hold
// one value is sent as that value instead of an array: in a batch the
// consumer, the source, the outcome and most optional fields are the same
// for every row, and each array is decoded element by element on both
// sides of the wire.
func insertFromArrays(table string, cols []arrayColumn, tail string) (string, []any) {
	var key strings.Builder
	key.WriteString(table + tail)
	args := make([]any, len(cols))
	for i, c := range cols {
		key.WriteString("," + c.name)
		if c.uniform {
			key.WriteString("=")
			args[i] = c.value
		} else {
			args[i] = c.values
		}
	}
	if q, ok := arrayTexts.Load(key.String()); ok {
		return q.(string), args
	}
	names, sel, arrays, aliases := make([]string, len(cols)), make([]string, len(cols)), []string{}, []string{}
	for i, c := range cols {
		names[i] = c.name
		p := "$" + strconv.Itoa(i+1)
		if c.uniform {
			sel[i] = p + "::" + c.typ
			continue
		}
		alias := "c" + strconv.Itoa(i)
		sel[i] = "u." + alias
		arrays, aliases = append(arrays, p+"::"+c.typ+"[]"), append(aliases, alias)
	}
	from := " FROM unnest(" + strings.Join(arrays, ", ") + ") WITH ORDINALITY AS u(" + strings.Join(aliases, ", ") + ", n) ORDER BY u.n"
	if len(arrays) == 0 {
		from = ""
	}
	q := "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ") SELECT " + strings.Join(sel, ", ") + from + tail
	arrayTexts.Store(key.String(), q)
	return q, args
}

// keyAdvanceArrays is KeyAdvanceMany in one statement.
func (t *Executor) keyAdvanceArrays(ctx context.Context, p store.KeyAdvanceManyParams) (int, error) {
	st := keyAdvanceStatement(p)
	res, err := t.exec(ctx, st.Query, st.Args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// keyAdvanceStatement is KeyAdvanceMany's one statement: each key's version
// moves from prev to next when it still is prev. A key named twice moves
// at most once, as in the CASE of advanceText. The rows it affects are
// the moves won.
func keyAdvanceStatement(p store.KeyAdvanceManyParams) store.Statement {
	keys, prev, next := make([]string, 0, len(p.Moves)), make([]int64, 0, len(p.Moves)), make([]int64, 0, len(p.Moves))
	seen := make(map[string]bool, len(p.Moves))
	for _, m := range p.Moves {
		if seen[m.Key] {
			continue
		}
		seen[m.Key] = true
		pv := int64(-1)
		if m.Prev != nil {
			pv = *m.Prev
		}
		keys, prev, next = append(keys, m.Key), append(prev, pv), append(next, m.Next)
	}
	return store.Statement{Query: `UPDATE seqbox_keys k SET version = m.next, updated_at = $4, baseline = COALESCE(k.baseline, m.next)
		FROM (SELECT f.ctid AS tid, u.next FROM unnest($2::text[], $3::bigint[], $5::bigint[]) AS u(key, prev, next)
			CROSS JOIN LATERAL (SELECT ctid FROM seqbox_keys WHERE consumer = $1 AND partitionkey = u.key
				AND COALESCE(version, -1) = u.prev FOR UPDATE) f) m
		WHERE k.ctid = m.tid`,
		Args: []any{p.Consumer, keys, prev, micros(p.At), next}}
}

// inboxGetArrays is InboxGetMany in one statement.
func (t *Executor) inboxGetArrays(ctx context.Context, p store.InboxGetManyParams, out map[store.Identity]store.InboxRow) error {
	sources, ids := make([]string, len(p.IDs)), make([]string, len(p.IDs))
	for i, id := range p.IDs {
		sources[i], ids[i] = id.Source, id.ID
	}
	rows, err := t.query(ctx, `SELECT `+inboxColumns+`, i.source, i.id
		FROM seqbox_inbox i JOIN unnest($2::text[], $3::text[]) AS u(s, d) ON i.source = u.s AND i.id = u.d
		WHERE i.consumer = $1`, p.Consumer, sources, ids)
	if err != nil {
		return err
	}
	return scanInboxRows(rows, p.Consumer, out)
}

// sortedUnique returns keys sorted and without repeats.
func sortedUnique(keys []string) []string {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	return slices.Compact(keys)
}
