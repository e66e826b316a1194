package bench

import (
	"context"
	"fmt"
	"time"
)

// keyChunk is how many key rows one seeding statement inserts.
const keyChunk = 100_000

// keyName is the partition key of key number i of a seeded key space:
// zero-padded, so the seeded rows go into the primary key in order.
func keyName(prefix string, i int) string { return fmt.Sprintf("%s%07d", prefix, i) }

// seedKeys creates n key state rows for the bench consumer, as EnsureKey
// would (no version yet), named keyName(prefix, 0..n-1), in one
// transaction of multi-row INSERTs of keyChunk rows each: generate_series
// on PostgreSQL, a recursive CTE on SQLite. Then it does, untimed, what
// the database would soon do on its own (see checkpointKeys).
func seedKeys(ctx context.Context, e *env, prefix string, n int) (time.Duration, error) {
	t0 := time.Now()
	tx, err := e.st.DB().BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("seed keys: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	q := `WITH RECURSIVE g(x) AS (SELECT $3 UNION ALL SELECT x + 1 FROM g WHERE x < $4)
		INSERT INTO seqbox_keys (consumer, partitionkey, updated_at) SELECT $1, printf('%s%07d', $2, x), $5 FROM g`
	if e.pg {
		q = `INSERT INTO seqbox_keys (consumer, partitionkey, updated_at)
			SELECT $1::text, $2::text || lpad(g::text, 7, '0'), $5::bigint FROM generate_series($3::bigint, $4::bigint) g`
	}
	now := time.Now().UnixMicro()
	for from := 0; from < n; from += keyChunk {
		if _, err := tx.ExecContext(ctx, q, Consumer, prefix, from, min(from+keyChunk, n)-1, now); err != nil {
			return 0, fmt.Errorf("seed keys: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("seed keys: %w", err)
	}
	took := time.Since(t0)
	return took, checkpointKeys(ctx, e)
}

// checkpointKeys checkpoints the WAL on SQLite (else the first commits of the
// measured run would copy the seeded pages into the database file), and
// runs VACUUM ANALYZE on seqbox_keys on PostgreSQL.
func checkpointKeys(ctx context.Context, e *env) error {
	q := `PRAGMA wal_checkpoint(TRUNCATE)`
	if e.pg {
		q = `VACUUM (ANALYZE) seqbox_keys`
	}
	if _, err := e.st.DB().ExecContext(ctx, q); err != nil {
		return fmt.Errorf("seed keys: settle: %w", err)
	}
	return nil
}

// keyRows counts the bench consumer's key rows named prefix…, and those
// of them with a version (a message was applied on them).
func keyRows(ctx context.Context, e *env, prefix string) (all, versioned int64, err error) {
	err = e.st.DB().QueryRowContext(ctx, `SELECT COUNT(*), COUNT(version) FROM seqbox_keys
		WHERE consumer = $1 AND partitionkey >= $2 AND partitionkey < $3`, Consumer, prefix, prefixEnd(prefix)).Scan(&all, &versioned)
	return all, versioned, err
}

// dropUnusedKeys deletes the seeded key rows no message touched, so that
// a run leaves behind no more key rows than messages.
func dropUnusedKeys(ctx context.Context, e *env, prefix string) error {
	_, err := e.st.DB().ExecContext(ctx, `DELETE FROM seqbox_keys
		WHERE consumer = $1 AND partitionkey >= $2 AND partitionkey < $3 AND version IS NULL`, Consumer, prefix, prefixEnd(prefix))
	if err != nil {
		return fmt.Errorf("seed keys: clean up: %w", err)
	}
	return nil
}

// prefixEnd is the least string above every string that starts with
// prefix (prefix ends in an ASCII character below 0x7f).
func prefixEnd(prefix string) string {
	return prefix[:len(prefix)-1] + string(prefix[len(prefix)-1]+1)
}
