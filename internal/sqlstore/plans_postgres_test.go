package sqlstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/store"
)

// The keys' rows and the decisions, which grow with the keys and the
// events, are looked up by a batch's keys or identities as one probe of
// the table's key per element, whatever the tables hold and whatever the
// planner believes they hold. A new store's tables have no statistics
// until autovacuum's first ANALYZE, and pgx's prepared statements keep
// the plan made then; the planner took `consumer = $1` (every row of a
// store with one consumer) for a handful of rows, and read all of the
// consumer's rows per statement with a filter or a hash join, a cost that
// grew with the table. So the plans are checked on tables of 20,000 rows
// of one consumer, never analyzed, and analyzed while empty, and the
// generic plan a prepared statement keeps when it was made on empty
// tables (its shape is what counts: it is kept as the tables grow): no
// sequential scan, no hash or merge join, no index searched by the
// consumer alone.
func TestKeyProbesUseTheKeyWhateverTheStatistics(t *testing.T) {
	for _, c := range []string{"never analyzed", "analyzed empty", "generic plan made empty"} {
		t.Run(c, func(t *testing.T) {
			ctx := context.Background()
			u := pgtest.URL(t)
			openPostgres(t, u) // creates the tables
			db, err := pgdb.Open(ctx, u)
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			conn, err := db.Conn(ctx) // one session: a generic plan is its own
			require.NoError(t, err)
			t.Cleanup(func() { conn.Close() })
			var keys []string
			var ids []store.Identity
			for i := 0; i < 100; i++ {
				keys = append(keys, fmt.Sprintf("k%05d", i*97))
				ids = append(ids, store.Identity{Source: "s", ID: fmt.Sprintf("e%05d", i*97)})
			}
			switch c {
			case "analyzed empty":
				_, err := conn.ExecContext(ctx, `ANALYZE seqbox_keys, seqbox_decisions`)
				require.NoError(t, err)
				fallthrough
			case "never analyzed":
				fillOneConsumer(t, conn, "c", 20000)
			}
			for name, st := range sqlstore.KeyProbes("c", keys, ids) {
				p := explain(t, conn, name, st, c == "generic plan made empty")
				var root []struct{ Plan planNode }
				require.NoError(t, json.Unmarshal([]byte(p), &root), name)
				assert.Empty(t, root[0].Plan.scans(), "%s:\n%s", name, p)
			}
		})
	}
}

// explain is st's plan on conn. With generic, it is the generic plan a
// prepared statement keeps once made (PREPARE, then EXPLAIN EXECUTE under
// force_generic_plan); otherwise st is planned with its arguments.
func explain(t *testing.T, conn *sql.Conn, name string, st store.Statement, generic bool) string {
	ctx := context.Background()
	q, args := st.Query, st.Args
	if generic {
		types, values := make([]string, len(st.Args)), make([]string, len(st.Args))
		for i, a := range st.Args {
			types[i], values[i] = sqlLiteral(t, a)
		}
		stmt := "p_" + strings.ReplaceAll(name, " ", "_")
		for _, q := range []string{`SET plan_cache_mode = force_generic_plan`,
			"PREPARE " + stmt + "(" + strings.Join(types, ", ") + ") AS " + st.Query} {
			_, err := conn.ExecContext(ctx, q)
			require.NoError(t, err, q)
		}
		q, args = "EXECUTE "+stmt+"("+strings.Join(values, ", ")+")", nil
	}
	var plan string
	require.NoError(t, conn.QueryRowContext(ctx, "EXPLAIN (FORMAT JSON) "+q, args...).Scan(&plan), name)
	return plan
}

// sqlLiteral is a's SQL type and literal.
func sqlLiteral(t *testing.T, a any) (typ, lit string) {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	switch v := a.(type) {
	case string:
		return "text", quote(v)
	case int64:
		return "bigint", strconv.FormatInt(v, 10)
	case []string:
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = quote(s)
		}
		return "text[]", "ARRAY[" + strings.Join(q, ",") + "]::text[]"
	case []int64:
		q := make([]string, len(v))
		for i, n := range v {
			q[i] = strconv.FormatInt(n, 10)
		}
		return "bigint[]", "ARRAY[" + strings.Join(q, ",") + "]::bigint[]"
	}
	t.Fatalf("no literal for %T", a)
	return "", ""
}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan.
type planNode struct {
	Type   string     `json:"Node Type"`
	Index  string     `json:"Index Name"`
	Cond   string     `json:"Index Cond"`
	Filter string     `json:"Filter"`
	Plans  []planNode `json:"Plans"`
}

// scans are the nodes of p's tree that read more than the probed keys:
// a sequential scan, a hash or merge join, or an index searched by the
// consumer alone (whose rows a filter or a join then picks from).
func (p planNode) scans() []string {
	var out []string
	if slices.Contains([]string{"Seq Scan", "Hash Join", "Merge Join"}, p.Type) ||
		p.Cond != "" && !strings.Contains(p.Cond, " AND ") {
		out = append(out, strings.TrimSpace(p.Type+" "+p.Index+" "+p.Cond+" "+p.Filter))
	}
	for _, c := range p.Plans {
		out = append(out, c.scans()...)
	}
	return out
}

// fillOneConsumer gives consumer n keys (k00000…) and n decisions (of
// identities s/e00000…) on conn.
func fillOneConsumer(t *testing.T, conn *sql.Conn, consumer string, n int) {
	t.Helper()
	for _, q := range []string{
		`INSERT INTO seqbox_keys (consumer, partitionkey, updated_at) SELECT $1, 'k' || lpad(i::text, 5, '0'), 0 FROM generate_series(0, $2 - 1) i`,
		`INSERT INTO seqbox_decisions (consumer, source, id, decision, decided_at)
			SELECT $1, 's', 'e' || lpad(i::text, 5, '0'), '\x00', 0 FROM generate_series(0, $2 - 1) i`,
	} {
		_, err := conn.ExecContext(context.Background(), q, consumer, n)
		require.NoError(t, err, q)
	}
}
