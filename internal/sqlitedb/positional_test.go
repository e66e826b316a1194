package sqlitedb

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/dialect"
)

// A statement rewritten by dialect.Positional reads and writes on SQLite
// exactly what the $n text does: repeated and out-of-order parameters,
// and a $1 inside a literal left alone.
func TestPositionalRunsAsWrittenOnSQLite(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "p.db"))
	require.NoError(t, err)
	defer db.Close()
	_, err = db.ExecContext(ctx, `CREATE TABLE t (c TEXT, k TEXT, at INTEGER, note TEXT)`)
	require.NoError(t, err)

	const insert = `INSERT INTO t (c, k, at, note) VALUES ($1, $3, $2, '$1 stays'), ($1, $4, $2, '$4 -- stays')`
	args := []any{"consumer", int64(7), "k1", "k2"}
	q, pargs := dialect.Positional(insert, args)
	require.NotEqual(t, insert, q, "the text is rewritten")
	_, err = db.ExecContext(ctx, q, pargs...)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, insert, args...)
	require.NoError(t, err)

	const read = `SELECT c, k, at, note FROM t WHERE c = $1 AND at = $2 ORDER BY rowid`
	rows := func(q string, args ...any) [][4]any {
		rs, err := db.QueryContext(ctx, q, args...)
		require.NoError(t, err)
		defer rs.Close()
		var out [][4]any
		for rs.Next() {
			var r [4]any
			require.NoError(t, rs.Scan(&r[0], &r[1], &r[2], &r[3]))
			out = append(out, r)
		}
		require.NoError(t, rs.Err())
		return out
	}
	want := rows(read, "consumer", int64(7))
	require.Len(t, want, 4)
	require.Equal(t, want[:2], want[2:], "the rewritten insert wrote what the $n one did")
	require.Equal(t, "k2", want[1][1])
	require.Equal(t, "$4 -- stays", want[1][3])
	rq, rargs := dialect.Positional(read, []any{"consumer", int64(7)})
	require.Equal(t, want, rows(rq, rargs...))
}
