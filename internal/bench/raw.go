package bench

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rawTable is where the raw limit writes: one row per message, keyed like
// an inbox identity, holding the message's bytes.
const rawTable = `CREATE TABLE IF NOT EXISTS bench_raw (
	run TEXT NOT NULL, id TEXT NOT NULL, body %s NOT NULL, PRIMARY KEY (run, id))`

// RawResult is what the raw limit measured.
type RawResult struct {
	// Rows were committed in Elapsed.
	Rows    int64
	Elapsed time.Duration
	// Latency is per row: the duration of the transaction that wrote it
	// (begin → commit).
	Latency Latency
}

// RawInsert is the floor cost of a durable write on db: len(bodies) plain
// INSERTs, batch rows per transaction, workers transactions at a time,
// with the pool's own durability settings. pg says db is PostgreSQL. The
// rows are checked and deleted afterwards, untimed.
func RawInsert(ctx context.Context, db *sql.DB, pg bool, run string, bodies [][]byte, batch, workers int) (RawResult, error) {
	blob := "BLOB"
	if pg {
		blob = "BYTEA"
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf(rawTable, blob)); err != nil {
		return RawResult{}, fmt.Errorf("raw: create table: %w", err)
	}
	var mu sync.Mutex
	var lats []time.Duration
	elapsed, err := inParallel(len(bodies), batch, workers, func(from, to int) error {
		t0 := time.Now()
		if err := rawTx(ctx, db, run, from, bodies[from:to]); err != nil {
			return err
		}
		d := time.Since(t0)
		mu.Lock()
		for range to - from {
			lats = append(lats, d)
		}
		mu.Unlock()
		return nil
	})
	res := RawResult{Rows: int64(len(lats)), Elapsed: elapsed, Latency: LatencyOf(lats)}
	if err != nil {
		return res, fmt.Errorf("raw: insert: %w", err)
	}
	var stored int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM bench_raw WHERE run = $1`, run).Scan(&stored); err != nil {
		return res, fmt.Errorf("raw: count: %w", err)
	}
	if stored != int64(len(bodies)) {
		return res, fmt.Errorf("raw: %d rows stored, want %d", stored, len(bodies))
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM bench_raw WHERE run = $1`, run); err != nil {
		return res, fmt.Errorf("raw: clean up: %w", err)
	}
	return res, nil
}

// rawTx inserts bodies (message numbers from, from+1, ...) in one
// transaction.
func rawTx(ctx context.Context, db *sql.DB, run string, from int, bodies [][]byte) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO bench_raw (run, id, body) VALUES ($1, $2, $3)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for i, b := range bodies {
		if _, err := stmt.ExecContext(ctx, run, fmt.Sprint(from+i), b); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// rawBatches and rawWriters are the raw limit's search: the best rate over
// every pair is the limit.
var (
	rawBatches = []int{100, 300, 1000}
	rawWriters = []int{1, 2, 4}
)

// rawLimit writes n messages' rows once per batch size and writer count
// of the search and returns the best rate and how it was reached.
func rawLimit(ctx context.Context, e *env, run string, n, keys int, step func(string)) (float64, string, error) {
	best, how := 0.0, ""
	for _, b := range rawBatches {
		for _, writers := range rawWriters {
			step(fmt.Sprintf("batch %d, %d writers", b, writers))
			r, err := rawRows(ctx, e.st.DB(), e.pg, fmt.Sprintf("%s-%d-%d", run, b, writers), n, keys, b, writers)
			if err != nil {
				return 0, "", err
			}
			if r > best {
				best, how = r, fmt.Sprintf("batch %d, %d writers", b, writers)
			}
		}
	}
	return best, how, nil
}

// rawHash stands for a payload hash in the raw inbox rows.
const rawHash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// rawRetention is how far ahead the raw inbox rows' retention_until lies:
// seqbox's default Config.Retention.
const rawRetention = 30 * 24 * time.Hour

// rawRows writes, for each of n messages, the four rows seqbox writes
// (inbox identity, key version, effect, object) into copies of seqbox's
// own tables (createRawTables), batch messages per transaction and
// writers transactions at a time, and returns messages per second. The
// copies are named for run, counted, and dropped afterwards, untimed.
func rawRows(ctx context.Context, db *sql.DB, pg bool, run string, n, keys, batch, writers int) (perSec float64, err error) {
	t := rawTablesFor(strings.ReplaceAll(run, "-", "_"))
	defer func() {
		if derr := dropRawTables(context.WithoutCancel(ctx), db, t); err == nil {
			err = derr
		}
	}()
	if err := createRawTables(ctx, db, pg, t); err != nil {
		return 0, err
	}
	write := rawRowsTx
	if pg {
		write = rawRowsTxPG
	}
	elapsed, err := inParallel(n, batch, writers, func(from, to int) error {
		return write(ctx, db, t, run, from, to, keys)
	})
	if err != nil {
		return 0, fmt.Errorf("raw: %w", err)
	}
	for _, c := range []struct {
		table string
		want  int
	}{{t.inbox, n}, {t.effects, n}, {t.keys, min(n, keys)}, {t.objects, min(n, keys)}} {
		var got int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+c.table).Scan(&got); err != nil {
			return 0, fmt.Errorf("raw: count: %w", err)
		}
		if got != c.want {
			return 0, fmt.Errorf("raw: %s holds %d rows, want %d", c.table, got, c.want)
		}
	}
	return rate(int64(n), elapsed), nil
}

// rawMessage is message i's identity, key and version, spelled like those
// of the bench's messages (Body).
func rawMessage(run string, i, keys int) (id, key string, version int64) {
	return run + "-" + strconv.Itoa(i), run + "-k" + strconv.Itoa(i%keys), int64(i/keys + 1)
}

// rawChunk is the most messages one SQLite statement of the raw limit
// writes: 128 rows of the inbox's nine bound values stay far below
// SQLite's limit of 32,766 parameters.
const rawChunk = 128

// The raw limit's multi-row statements on SQLite, with the columns seqbox
// fills; %s is the copy's table and %s the rows' VALUES list (rawValues).
const (
	rawInbox = `INSERT INTO %s (consumer, source, id, payload_hash, event_type, partitionkey, objectversion,
		outcome, received_at, processed_at, retention_until) VALUES %s`
	rawInboxRow = `(?, ?, ?, ?, 'bench.step', ?, ?, 'applied', ?, ?, ?)`
	rawKeys     = `INSERT INTO %s (consumer, partitionkey, version, updated_at) VALUES %s
		ON CONFLICT (consumer, partitionkey) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at`
	rawKeyRow    = `(?, ?, ?, ?)`
	rawEffects   = `INSERT INTO %s (consumer, source, id, partitionkey, objectversion, type) VALUES %s`
	rawEffectRow = `(?, ?, ?, ?, ?, 'bench.step')`
	rawObjects   = `INSERT INTO %s (consumer, partitionkey, state, version) VALUES %s
		ON CONFLICT (consumer, partitionkey) DO UPDATE SET state = excluded.state, version = excluded.version`
	rawObjectRow = `(?, ?, 'bench.step', ?)`
)

// rawBatch is one transaction's messages, as the raw limit writes them:
// every message's identity, key and version, and each key once at its
// last version, in byte order (the lock order seqbox uses too, so that
// writers wait for each other instead of deadlocking). seqbox advances
// each key once per batch as well.
type rawBatch struct {
	ids, ks []string
	vs      []int64
	lk      []string
	lv      []int64
}

func newRawBatch(run string, from, to, keys int) rawBatch {
	b := rawBatch{ids: make([]string, 0, to-from), ks: make([]string, 0, to-from), vs: make([]int64, 0, to-from)}
	last := map[string]int64{}
	for i := from; i < to; i++ {
		id, key, v := rawMessage(run, i, keys)
		b.ids, b.ks, b.vs = append(b.ids, id), append(b.ks, key), append(b.vs, v)
		last[key] = max(last[key], v)
	}
	b.lk = slices.Sorted(maps.Keys(last))
	for _, k := range b.lk {
		b.lv = append(b.lv, last[k])
	}
	return b
}

// rawValues is a VALUES list of n copies of row.
func rawValues(row string, n int) string {
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// rawRowsTx writes messages [from, to) in one transaction on SQLite with
// multi-row statements, rawChunk messages each; a statement the
// transaction runs again (every full chunk) is prepared once: a
// statement pays its fixed cost once per 128 rows here, where a prepared
// single-row statement would pay it once per row
// (docs/benchmarks-history.md §16).
func rawRowsTx(ctx context.Context, db *sql.DB, t rawTables, run string, from, to, keys int) error {
	b := newRawBatch(run, from, to, keys)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	prepared := map[string]*sql.Stmt{}
	exec := func(text, row string, n int, args []any) error {
		q := fmt.Sprintf(text, rawValues(row, n))
		st, ok := prepared[q]
		if !ok {
			var err error
			if st, err = tx.PrepareContext(ctx, q); err != nil {
				return err
			}
			prepared[q] = st // closed with the transaction
		}
		_, err := st.ExecContext(ctx, args...)
		return err
	}
	now := time.Now()
	at, until := now.UnixMicro(), now.Add(rawRetention).UnixMicro()
	inbox, effects := fmt.Sprintf(rawInbox, t.inbox, "%s"), fmt.Sprintf(rawEffects, t.effects, "%s")
	for lo := 0; lo < len(b.ids); lo += rawChunk {
		hi := min(len(b.ids), lo+rawChunk)
		ia, ea := make([]any, 0, (hi-lo)*9), make([]any, 0, (hi-lo)*5)
		for i := lo; i < hi; i++ {
			ia = append(ia, Consumer, Consumer, b.ids[i], rawHash, b.ks[i], b.vs[i], at, at, until)
			ea = append(ea, Consumer, Consumer, b.ids[i], b.ks[i], b.vs[i])
		}
		if err := exec(inbox, rawInboxRow, hi-lo, ia); err != nil {
			return err
		}
		if err := exec(effects, rawEffectRow, hi-lo, ea); err != nil {
			return err
		}
	}
	for lo := 0; lo < len(b.lk); lo += rawChunk {
		hi := min(len(b.lk), lo+rawChunk)
		ka, oa := make([]any, 0, (hi-lo)*4), make([]any, 0, (hi-lo)*3)
		for i := lo; i < hi; i++ {
			ka = append(ka, Consumer, b.lk[i], b.lv[i], at)
			oa = append(oa, Consumer, b.lk[i], b.lv[i])
		}
		if err := exec(fmt.Sprintf(rawKeys, t.keys, "%s"), rawKeyRow, hi-lo, ka); err != nil {
			return err
		}
		if err := exec(fmt.Sprintf(rawObjects, t.objects, "%s"), rawObjectRow, hi-lo, oa); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// The raw limit's PostgreSQL statements: one per table per transaction,
// every message's column an array (unnest), so that a batch costs four
// round trips and a commit whatever its size (rawBatch says which rows).
// %s is the copy's table.
const (
	rawInboxPG = `INSERT INTO %s (consumer, source, id, payload_hash, event_type, partitionkey, objectversion,
		outcome, received_at, processed_at, retention_until)
		SELECT $1, $1, u.id, $2, 'bench.step', u.k, u.v, 'applied', $3, $3, $4 FROM unnest($5::text[], $6::text[], $7::bigint[]) AS u(id, k, v)`
	rawEffectsPG = `INSERT INTO %s (consumer, source, id, partitionkey, objectversion, type)
		SELECT $1, $1, u.id, u.k, u.v, 'bench.step' FROM unnest($2::text[], $3::text[], $4::bigint[]) AS u(id, k, v)`
	rawKeysPG = `INSERT INTO %s (consumer, partitionkey, version, updated_at)
		SELECT $1, u.k, u.v, $2 FROM unnest($3::text[], $4::bigint[]) AS u(k, v) ORDER BY u.k COLLATE "C"
		ON CONFLICT (consumer, partitionkey) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at`
	rawObjectsPG = `INSERT INTO %s (consumer, partitionkey, state, version)
		SELECT $1, u.k, 'bench.step', u.v FROM unnest($2::text[], $3::bigint[]) AS u(k, v) ORDER BY u.k COLLATE "C"
		ON CONFLICT (consumer, partitionkey) DO UPDATE SET state = excluded.state, version = excluded.version`
)

// rawRowsTxPG writes messages [from, to) in one transaction with the
// multi-row statements above.
func rawRowsTxPG(ctx context.Context, db *sql.DB, t rawTables, run string, from, to, keys int) error {
	b := newRawBatch(run, from, to, keys)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	now := time.Now()
	at, until := now.UnixMicro(), now.Add(rawRetention).UnixMicro()
	for _, s := range []struct {
		q    string
		args []any
	}{
		{fmt.Sprintf(rawInboxPG, t.inbox), []any{Consumer, rawHash, at, until, b.ids, b.ks, b.vs}},
		{fmt.Sprintf(rawKeysPG, t.keys), []any{Consumer, at, b.lk, b.lv}},
		{fmt.Sprintf(rawEffectsPG, t.effects), []any{Consumer, b.ids, b.ks, b.vs}},
		{fmt.Sprintf(rawObjectsPG, t.objects), []any{Consumer, b.lk, b.lv}},
	} {
		if _, err := tx.ExecContext(ctx, s.q, s.args...); err != nil {
			return err
		}
	}
	return tx.Commit()
}
