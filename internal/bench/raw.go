package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
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

// rawSchema holds the raw limit's tables: the same rows seqbox writes per
// applied message, with no pipeline around them.
const rawSchema = `CREATE TABLE IF NOT EXISTS bench_raw_inbox (run TEXT NOT NULL, id TEXT NOT NULL, hash TEXT NOT NULL,
	partitionkey TEXT NOT NULL, objectversion BIGINT, outcome TEXT NOT NULL, received_at BIGINT NOT NULL, PRIMARY KEY (run, id));
CREATE TABLE IF NOT EXISTS bench_raw_keys (run TEXT NOT NULL, partitionkey TEXT NOT NULL, version BIGINT, PRIMARY KEY (run, partitionkey));
CREATE TABLE IF NOT EXISTS bench_raw_effects (run TEXT NOT NULL, id TEXT NOT NULL, partitionkey TEXT NOT NULL, type TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bench_raw_objects (run TEXT NOT NULL, partitionkey TEXT NOT NULL, state TEXT NOT NULL, version BIGINT,
	PRIMARY KEY (run, partitionkey))`

// rawHash stands for a payload hash in the raw inbox rows.
const rawHash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// rawRows writes, for each of n messages, the four rows seqbox writes
// (inbox identity, key version, effect, object), batch messages per
// transaction and writers transactions at a time, and returns messages per
// second. The rows are counted and deleted afterwards, untimed.
func rawRows(ctx context.Context, db *sql.DB, pg bool, run string, n, keys, batch, writers int) (float64, error) {
	for _, stmt := range splitSQL(rawSchema) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return 0, fmt.Errorf("raw: create tables: %w", err)
		}
	}
	write := rawRowsTx
	if pg {
		write = rawRowsTxPG
	}
	elapsed, err := inParallel(n, batch, writers, func(from, to int) error {
		return write(ctx, db, run, from, to, keys)
	})
	if err != nil {
		return 0, fmt.Errorf("raw: %w", err)
	}
	for _, c := range []struct {
		table string
		want  int
	}{{"bench_raw_inbox", n}, {"bench_raw_effects", n}, {"bench_raw_keys", min(n, keys)}, {"bench_raw_objects", min(n, keys)}} {
		var got int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+c.table+` WHERE run = $1`, run).Scan(&got); err != nil {
			return 0, fmt.Errorf("raw: count: %w", err)
		}
		if got != c.want {
			return 0, fmt.Errorf("raw: %s holds %d rows, want %d", c.table, got, c.want)
		}
	}
	for _, t := range []string{"bench_raw_inbox", "bench_raw_keys", "bench_raw_effects", "bench_raw_objects"} {
		if _, err := db.ExecContext(ctx, `DELETE FROM `+t+` WHERE run = $1`, run); err != nil {
			return 0, fmt.Errorf("raw: clean up: %w", err)
		}
	}
	return rate(int64(n), elapsed), nil
}

// rawMessage is message i's identity, key and version.
func rawMessage(i, keys int) (id, key string, version int64) {
	return strconv.Itoa(i), "k" + strconv.Itoa(i%keys), int64(i/keys + 1)
}

// rawRowsTx writes messages [from, to) in one transaction, a prepared
// single-row statement per row: in-process SQLite has no round trip to
// save, and this is its fastest way.
func rawRowsTx(ctx context.Context, db *sql.DB, run string, from, to, keys int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	now := time.Now().UnixMicro()
	for i := from; i < to; i++ {
		id, key, v := rawMessage(i, keys)
		for _, s := range []struct {
			q    string
			args []any
		}{
			{`INSERT INTO bench_raw_inbox (run, id, hash, partitionkey, objectversion, outcome, received_at) VALUES ($1, $2, $3, $4, $5, 'applied', $6)`,
				[]any{run, id, rawHash, key, v, now}},
			{`INSERT INTO bench_raw_keys (run, partitionkey, version) VALUES ($1, $2, $3)
				ON CONFLICT (run, partitionkey) DO UPDATE SET version = excluded.version`, []any{run, key, v}},
			{`INSERT INTO bench_raw_effects (run, id, partitionkey, type) VALUES ($1, $2, $3, 'bench.step')`, []any{run, id, key}},
			{`INSERT INTO bench_raw_objects (run, partitionkey, state, version) VALUES ($1, $2, 'bench.step', $3)
				ON CONFLICT (run, partitionkey) DO UPDATE SET state = excluded.state, version = excluded.version`, []any{run, key, v}},
		} {
			if _, err := tx.ExecContext(ctx, s.q, s.args...); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// The raw limit's PostgreSQL statements: one per table per transaction,
// every message's column an array (unnest), so that a batch costs four
// round trips and a commit whatever its size. A key written by several
// messages of the batch is written once, at its last version, as seqbox
// advances each key once per batch; keys go in byte order, the lock order
// seqbox uses too, so that writers wait for each other instead of
// deadlocking.
const (
	rawInboxPG = `INSERT INTO bench_raw_inbox (run, id, hash, partitionkey, objectversion, outcome, received_at)
		SELECT $1, u.id, $2, u.k, u.v, 'applied', $3 FROM unnest($4::text[], $5::text[], $6::bigint[]) AS u(id, k, v)`
	rawEffectsPG = `INSERT INTO bench_raw_effects (run, id, partitionkey, type)
		SELECT $1, u.id, u.k, 'bench.step' FROM unnest($2::text[], $3::text[]) AS u(id, k)`
	rawKeysPG = `INSERT INTO bench_raw_keys (run, partitionkey, version)
		SELECT $1, u.k, u.v FROM unnest($2::text[], $3::bigint[]) AS u(k, v) ORDER BY u.k COLLATE "C"
		ON CONFLICT (run, partitionkey) DO UPDATE SET version = excluded.version`
	rawObjectsPG = `INSERT INTO bench_raw_objects (run, partitionkey, state, version)
		SELECT $1, u.k, 'bench.step', u.v FROM unnest($2::text[], $3::bigint[]) AS u(k, v) ORDER BY u.k COLLATE "C"
		ON CONFLICT (run, partitionkey) DO UPDATE SET state = excluded.state, version = excluded.version`
)

// rawRowsTxPG writes messages [from, to) in one transaction with the
// multi-row statements above.
func rawRowsTxPG(ctx context.Context, db *sql.DB, run string, from, to, keys int) error {
	ids, ks := make([]string, 0, to-from), make([]string, 0, to-from)
	vs := make([]int64, 0, to-from)
	last := map[string]int64{}
	for i := from; i < to; i++ {
		id, key, v := rawMessage(i, keys)
		ids, ks, vs = append(ids, id), append(ks, key), append(vs, v)
		last[key] = max(last[key], v)
	}
	lk, lv := make([]string, 0, len(last)), make([]int64, 0, len(last))
	for k, v := range last {
		lk, lv = append(lk, k), append(lv, v)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	for _, s := range []struct {
		q    string
		args []any
	}{
		{rawInboxPG, []any{run, rawHash, time.Now().UnixMicro(), ids, ks, vs}},
		{rawKeysPG, []any{run, lk, lv}},
		{rawEffectsPG, []any{run, ids, ks}},
		{rawObjectsPG, []any{run, lk, lv}},
	} {
		if _, err := tx.ExecContext(ctx, s.q, s.args...); err != nil {
			return err
		}
	}
	return tx.Commit()
}
