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

// A listing by tenant or cause searches its partial index, though the
// value is a parameter the planner does not see: the statement says the
// column is not empty, as the index's condition does. Without that, a
// listing read the whole inbox.
func TestInboxListSearchesItsIndexOnSQLite(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "plan.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	for _, f := range inboxListFilters {
		q, args := sqlstore.InboxListQuery(f.p)
		text, err := ddltest.SQLitePlan(ctx, st.DB(), q, args...)
		require.NoError(t, err)
		require.Contains(t, text, "USING INDEX "+f.index, text)
		require.NotContains(t, text+"\n", "SCAN seqbox_inbox\n", text)
	}
}

// The same on PostgreSQL, with sequential scans priced out of the session
// (on an empty table the planner would rightly prefer one): the index
// must be usable at all for the statement.
func TestInboxListSearchesItsIndexOnPostgres(t *testing.T) {
	ctx := context.Background()
	st := openPostgres(t, pgtest.URL(t))
	conn, err := st.DB().Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = conn.ExecContext(ctx, `SET enable_seqscan = off`)
	require.NoError(t, err)
	for _, f := range inboxListFilters {
		q, args := sqlstore.InboxListQuery(f.p)
		text, err := ddltest.Rows(ctx, conn, "EXPLAIN "+q, args...)
		require.NoError(t, err)
		require.Contains(t, text, f.index, text)
		require.NotContains(t, text, "Seq Scan", text)
	}
}
