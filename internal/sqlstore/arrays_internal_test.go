package sqlstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A column whose rows all hold one value goes as that value, the others
// as arrays read back in their order; a NULL shared by every row is one
// NULL, and NULLs mixed with values stay an array.
func TestInsertFromArraysSendsAUniformColumnOnce(t *testing.T) {
	v := int64(7)
	q, args := insertFromArrays("t", []arrayColumn{
		textColumn("consumer", []string{"c", "c"}),
		textColumn("id", []string{"1", "2"}),
		optIntColumn("version", []*int64{nil, nil}),
		optIntColumn("processed", []*int64{&v, nil}),
		intColumn("at", []int64{5, 5}),
	}, " RETURNING id")
	require.Equal(t, "INSERT INTO t (consumer, id, version, processed, at) SELECT $1::text, u.c1, $3::bigint, u.c3, $5::bigint"+
		" FROM unnest($2::text[], $4::bigint[]) WITH ORDINALITY AS u(c1, c3, n) ORDER BY u.n RETURNING id", q)
	require.Equal(t, []any{"c", []string{"1", "2"}, (*int64)(nil), []*int64{&v, nil}, int64(5)}, args)

	// One row: every column is a value, and there is nothing to unnest.
	q, args = insertFromArrays("t", []arrayColumn{textColumn("id", []string{"1"}), optIntColumn("version", []*int64{nil})}, "")
	require.Equal(t, "INSERT INTO t (id, version) SELECT $1::text, $2::bigint", q)
	require.Equal(t, []any{"1", (*int64)(nil)}, args)

	// The same columns with other values that are uniform: another text.
	q, _ = insertFromArrays("t", []arrayColumn{textColumn("id", []string{"1", "2"}), optIntColumn("version", []*int64{nil, &v})}, "")
	require.Equal(t, "INSERT INTO t (id, version) SELECT u.c0, u.c1 FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS u(c0, c1, n) ORDER BY u.n", q)
}
