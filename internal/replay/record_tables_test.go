package replay_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/sqlite"
)

// The record handler's tables are seqbox's own (seqbox_ names): an
// application's table called record_effects, in the database the gateway
// runs on, is neither written nor in the way. Before, serve wrote its
// effects there, or failed every event on a table of another shape. An
// older seqbox's record tables (exactly the columns it made) are renamed,
// their rows kept.
func TestRecordTablesAreSeqboxs(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store {
			st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "app.db"))
			require.NoError(t, err)
			return st
		},
		"postgres": func(t *testing.T) store.Store {
			st, err := postgres.Open(context.Background(), pgtest.URL(t))
			require.NoError(t, err)
			return st
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t)
			t.Cleanup(func() { _ = st.Close() })
			db := st.DB()
			// The application's own table of that name, and an older
			// seqbox's record_objects with a row.
			_, err := db.ExecContext(ctx, `CREATE TABLE record_effects (note TEXT)`)
			require.NoError(t, err)
			_, err = db.ExecContext(ctx, `INSERT INTO record_effects VALUES ('mine')`)
			require.NoError(t, err)
			_, err = db.ExecContext(ctx, `CREATE TABLE record_objects (consumer TEXT NOT NULL, partitionkey TEXT NOT NULL, state TEXT NOT NULL,
				version BIGINT, PRIMARY KEY (consumer, partitionkey))`)
			require.NoError(t, err)
			_, err = db.ExecContext(ctx, `INSERT INTO record_objects VALUES ('c', 'K', 'order.paid', 2)`)
			require.NoError(t, err)

			require.NoError(t, replay.EnsureRecordTables(ctx, db))
			require.NoError(t, replay.EnsureRecordTables(ctx, db), "again: nothing to do")

			var note string
			require.NoError(t, db.QueryRowContext(ctx, `SELECT note FROM record_effects`).Scan(&note))
			require.Equal(t, "mine", note, "the application's table is left alone")
			var effects int
			require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_record_effects`).Scan(&effects))
			require.Zero(t, effects)
			var state string
			require.NoError(t, db.QueryRowContext(ctx, `SELECT state FROM seqbox_record_objects WHERE partitionkey = 'K'`).Scan(&state))
			require.Equal(t, "order.paid", state, "the older seqbox's table is renamed, its rows kept")
		})
	}
}
