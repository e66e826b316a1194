package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/ddl/ddltest"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

// inboxListFilters are InboxList's three shapes, each with the index it
// is to search (migration 017's partial indexes).
var inboxListFilters = []struct {
	p     store.InboxListParams
	index string
}{
	{store.InboxListParams{Consumer: "c", Tenant: "acme", Limit: 50}, "seqbox_inbox_tenant"},
	{store.InboxListParams{Consumer: "c", CausationID: "CMD-1", Limit: 50}, "seqbox_inbox_causation"},
	{store.InboxListParams{Consumer: "c", DataSchema: "v2", Limit: 50}, "seqbox_inbox_dataschema"},
	{store.InboxListParams{Consumer: "c", Tenant: "acme", CausationID: "CMD-1", Limit: 50}, "seqbox_inbox_"},
}

// sqlitePlans returns a function that gives a statement's plan on a new
// SQLite store.
func sqlitePlans(t *testing.T) func(q string, args []any) string {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "plan.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return func(q string, args []any) string {
		text, err := ddltest.SQLitePlan(ctx, st.DB(), q, args...)
		require.NoError(t, err)
		return text
	}
}

// postgresPlans returns a function that gives a statement's plan on a
// new PostgreSQL store, with sequential scans priced out of the session
// (on an empty table the planner would rightly prefer one): an index
// must be usable at all for the statement to show it.
func postgresPlans(t *testing.T) func(q string, args []any) string {
	ctx := context.Background()
	st := openPostgres(t, pgtest.URL(t))
	conn, err := st.DB().Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = conn.ExecContext(ctx, `SET enable_seqscan = off`)
	require.NoError(t, err)
	return func(q string, args []any) string {
		text, err := ddltest.Rows(ctx, conn, "EXPLAIN "+q, args...)
		require.NoError(t, err)
		return text
	}
}

// A listing by tenant or cause searches its partial index, though the
// value is a parameter the planner does not see: the statement says the
// column is not empty, as the index's condition does. Without that, a
// listing read the whole inbox.
func TestInboxListSearchesItsIndexOnSQLite(t *testing.T) {
	plan := sqlitePlans(t)
	for _, f := range inboxListFilters {
		text := plan(sqlstore.InboxListQuery(f.p))
		require.Contains(t, text, "USING INDEX "+f.index, text)
		require.NotContains(t, text+"\n", "SCAN seqbox_inbox\n", text)
	}
}

// The same on PostgreSQL.
func TestInboxListSearchesItsIndexOnPostgres(t *testing.T) {
	plan := postgresPlans(t)
	for _, f := range inboxListFilters {
		text := plan(sqlstore.InboxListQuery(f.p))
		require.Contains(t, text, f.index, text)
		require.NotContains(t, text, "Seq Scan", text)
	}
}

// The stuck keys (`keys list`, the console's overview, polled) are found
// from what makes a key stuck (a block, a parked message, a turn that
// failed), not by reading every key: with a million quiet keys the
// listing read and grouped all of them, 1.6–1.9 s a call on SQLite.
func TestStuckKeysAreFoundWithoutReadingEveryKeyOnSQLite(t *testing.T) {
	text := sqlitePlans(t)(sqlstore.KeyViewListQuery(store.KeyViewListParams{Consumer: "c", Stuck: true}))
	require.Contains(t, text, "INDEX seqbox_keys_blocked (consumer=?)", text)
	require.NotContains(t, text, "sqlite_autoindex_seqbox_keys_1 (consumer=?)\n", text)
	require.NotContains(t, text+"\n", "SCAN seqbox_keys\n", text)
	require.NotContains(t, text+"\n", "SCAN k\n", text)
}

// The same on PostgreSQL: the blocked keys' partial index is used.
func TestStuckKeysAreFoundWithoutReadingEveryKeyOnPostgres(t *testing.T) {
	text := postgresPlans(t)(sqlstore.KeyViewListQuery(store.KeyViewListParams{Consumer: "c", Stuck: true}))
	require.Contains(t, text, "seqbox_keys_blocked", text)
	require.NotContains(t, text, "Seq Scan", text)
}

// The collisions (the console's overview polls them) are read through
// their partial index, not through every parked message of the consumer:
// with 100,000 parked behind a blocked key and no collision, a call took
// 1.1–1.9 s, then 0.14 s through the key index SQLite chose.
func TestCollisionsAreReadThroughTheirIndex(t *testing.T) {
	p := store.ParkedCollisionListParams{Consumer: "c", Limit: 100}
	text := sqlitePlans(t)(sqlstore.ParkedCollisionListQuery(false, p))
	require.Contains(t, text, "USING INDEX seqbox_parked_collision_once (consumer=?)", text)
	require.NotContains(t, text, "seqbox_parked_key", text)
	text = postgresPlans(t)(sqlstore.ParkedCollisionListQuery(true, p))
	require.Contains(t, text, "seqbox_parked_collision_once", text)
	require.NotContains(t, text, "Seq Scan", text)
}
