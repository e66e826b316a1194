package replay

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/pgtest"
)

// The batch record handler writes exactly the rows the per-message one
// does, on both databases: an effect row per applied event in commit
// order, and each object's state at its last applied event; an event that
// fails on purpose fails alone.
func TestRecordBatchHandlerWritesWhatRecordHandlerWrites(t *testing.T) {
	for name, db := range map[string]func(t testing.TB) string{
		"sqlite":   func(t testing.TB) string { return filepath.Join(t.TempDir(), "r.db") },
		"postgres": pgtest.URL,
	} {
		t.Run(name, func(t *testing.T) {
			per := recordRows(t, db(t), false)
			bulk := recordRows(t, db(t), true)
			require.Equal(t, per, bulk)
			require.Equal(t, []string{"e0 k0 v1", "e1 k1 v1", "e2 k2 v1", "e3 k0 v2", "e5 k2 v2", "e6 k0 v3", "e8 k2 v3", "e9 k0 v4"},
				per.effects, "every event but e4 (dead-lettered) and e7 (k1 v3, behind it)")
			require.Equal(t, []string{"k0 s.t v4", "k1 s.t v1", "k2 s.t v3"}, per.objects)
			require.Contains(t, per.outcomes, "e4 dead_lettered")
		})
	}
}

type recordState struct {
	outcomes, effects, objects []string
}

// recordRows delivers one batch through the record handler, as a Handler
// or as a BatchHandler, and returns the outcomes and the rows written.
func recordRows(t *testing.T, db string, batch bool) recordState {
	t.Helper()
	ctx := context.Background()
	st, err := dbopen.Store(ctx, db)
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, EnsureRecordTables(ctx, st.DB()))
	cfg := seqbox.Config{Name: "rec", Store: st, Logger: slog.New(slog.DiscardHandler)}
	if batch {
		cfg.BatchHandler = RecordBatchHandler("rec", pgdb.IsURL(db))
	} else {
		cfg.Handler = RecordHandlerOn(st.DB(), "rec")
	}
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(t, err)
	var bodies [][]byte
	for i := range 9 {
		data := `{}`
		switch i {
		case 4:
			data = `{"fail":"permanent"}`
		case 7:
			data = `{"fail":"transient"}`
		}
		bodies = append(bodies, fmt.Appendf(nil, `{"specversion":"1.0","id":"e%d","source":"s","type":"s.t","partitionkey":"k%d","objectversion":%d,"data":%s}`,
			i, i%3, i/3+1, data))
	}
	// k1 at version 2 (e4) is dead-lettered, so e7 (k1 v3, failing on
	// purpose too) waits behind it: a failure is the event's own, and the
	// batch around it applies.
	bodies = append(bodies, []byte(`{"specversion":"1.0","id":"e9","source":"s","type":"s.t","partitionkey":"k0","objectversion":4}`))
	out, err := c.DeliverBatch(ctx, bodies)
	require.NoError(t, err)
	var s recordState
	for _, results := range out {
		for _, res := range results {
			s.outcomes = append(s.outcomes, res.ID+" "+string(res.Outcome))
		}
	}
	s.effects = threeColumns(t, st.DB(), `SELECT id, partitionkey, objectversion FROM seqbox_record_effects WHERE consumer = 'rec' ORDER BY n`)
	s.objects = threeColumns(t, st.DB(), `SELECT partitionkey, state, version FROM seqbox_record_objects WHERE consumer = 'rec' ORDER BY partitionkey`)
	return s
}

// threeColumns reads rows of (text, text, version) as "a b vN".
func threeColumns(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a, b string
		var v int64
		require.NoError(t, rows.Scan(&a, &b, &v))
		out = append(out, fmt.Sprintf("%s %s v%d", a, b, v))
	}
	require.NoError(t, rows.Err())
	return out
}
