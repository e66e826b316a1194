package bench

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The raw limit writes every row (rawRows counts them) on both drivers (the PostgreSQL one with
// its multi-row statements, several writers on shared keys), and leaves
// nothing behind: its tables are gone afterwards.
func TestRawRowsWritesAndCleansUp(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testRawRows(t, openSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { testRawRows(t, openPostgres(t)) })
}

func testRawRows(t *testing.T, e *env) {
	ctx := context.Background()
	r, err := rawRows(ctx, e.st.DB(), e.pg, "rawtest", 1000, 7, 300, 4)
	require.NoError(t, err)
	require.Positive(t, r)
	for _, table := range rawTablesFor("rawtest").names() {
		_, err := e.st.DB().ExecContext(ctx, `SELECT 1 FROM `+table)
		require.Error(t, err, "%s is left behind", table)
	}
}

// The raw limit's tables are copies of the tables seqbox writes: the same
// columns (names, types, defaults, nullability, in order) and as many
// indexes, so that a raw row costs what seqbox's row costs.
func TestRawTablesCopySeqboxTables(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testRawTablesCopy(t, openSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { testRawTablesCopy(t, openPostgres(t)) })
}

func testRawTablesCopy(t *testing.T, e *env) {
	ctx := context.Background()
	db := e.st.DB()
	copies := rawTablesFor("copytest")
	require.NoError(t, createRawTables(ctx, db, e.pg, copies))
	t.Cleanup(func() { require.NoError(t, dropRawTables(context.Background(), db, copies)) })
	for i, to := range copies.names() {
		from := rawSources[i]
		src, cp := tableShape(t, db, e.pg, from), tableShape(t, db, e.pg, to)
		require.NotEmpty(t, src.columns, from)
		require.Equal(t, src.columns, cp.columns, "%s's columns", to)
		require.Equal(t, src.indexes, cp.indexes, "%s's indexes", to)
	}
	// seqbox's inbox has its primary key and more indexes besides: the copy
	// pays for each of them.
	require.GreaterOrEqual(t, tableShape(t, db, e.pg, copies.inbox).indexes, 3)
}

// shape is what a table's row costs to write: its columns, each as name,
// type, default and nullability, and how many indexes it has.
type shape struct {
	columns []string
	indexes int
}

func tableShape(t *testing.T, db *sql.DB, pg bool, table string) shape {
	t.Helper()
	cols, idx := `SELECT name || ' ' || type || ' ' || COALESCE(dflt_value, '') || ' ' || "notnull" FROM pragma_table_info($1) ORDER BY cid`,
		`SELECT COUNT(*) FROM pragma_index_list($1)`
	if pg {
		// By regclass, so that the table is the one the search path finds,
		// as the bench's statements do, whatever other schemas hold.
		cols = `SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' ||
			COALESCE(pg_get_expr(d.adbin, d.adrelid), '') || ' ' || a.attnotnull
			FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
			WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`
		idx = `SELECT COUNT(*) FROM pg_index WHERE indrelid = $1::regclass`
	}
	var s shape
	rows, err := db.Query(cols, table)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var c string
		require.NoError(t, rows.Scan(&c))
		s.columns = append(s.columns, c)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, db.QueryRow(idx, table).Scan(&s.indexes), fmt.Sprintf("indexes of %s", table))
	return s
}

// A raw batch writes every message's identity and each key once, at the
// last version the batch holds for it, in byte order: the rows seqbox
// leaves after the batch, and the lock order that keeps writers from
// deadlocking.
func TestRawBatchWritesEachKeyOnceAtItsLastVersion(t *testing.T) {
	b := newRawBatch("r", 5, 30, 12)
	require.Len(t, b.ids, 25)
	require.Equal(t, "r-5", b.ids[0])
	require.Equal(t, []string{"r-k0", "r-k1", "r-k10", "r-k11", "r-k2", "r-k3", "r-k4", "r-k5", "r-k6", "r-k7", "r-k8", "r-k9"}, b.lk)
	want := map[string]int64{}
	for i, k := range b.ks {
		want[k] = max(want[k], b.vs[i])
	}
	for i, k := range b.lk {
		require.Equal(t, want[k], b.lv[i], k)
	}
	require.Equal(t, int64(3), b.lv[0], "message 24 is key 0's last, at version 24/12+1")
}
