package bench

import (
	"context"
	"database/sql"
	"fmt"
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
