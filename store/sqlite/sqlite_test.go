package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/store/storetest"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openFresh opens a new store in its own temporary file.
func openFresh(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

func TestConformance(t *testing.T) {
	storetest.Exercise(t, openFresh)
}

// requireUntouched checks that path still holds exactly want and that
// opening it created no WAL or shared-memory file beside it.
func requireUntouched(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, got, "the file is left byte for byte unchanged")
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		_, err := os.Stat(path + suffix)
		require.True(t, os.IsNotExist(err), "%s%s must not be created", filepath.Base(path), suffix)
	}
}

func TestOpenRefusesANonSQLiteFile(t *testing.T) {
	for name, content := range map[string][]byte{
		"text":        []byte("name,qty\nwidget,10\n"),
		"binary":      {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'},
		"long binary": append([]byte("not a database\n"), make([]byte, 8192)...),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "seqbox.db")
			require.NoError(t, os.WriteFile(path, content, 0o600))
			st, err := sqlite.Open(context.Background(), path)
			require.ErrorIs(t, err, store.ErrForeignDatabase)
			require.Nil(t, st)
			require.Contains(t, err.Error(), path, "the error names the file")
			requireUntouched(t, path, content)
		})
	}
}

func TestExclusiveRefusesAForeignSQLiteDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "crm.db")
	// Somebody else's database, in the default rollback-journal mode.
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
		INSERT INTO customers (name) VALUES ('Júpiter'), ('Acme')`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	st, err := sqlite.OpenWith(ctx, path, sqlite.Options{Access: store.Exclusive})
	require.ErrorIs(t, err, store.ErrForeignDatabase)
	require.Nil(t, st)
	require.Contains(t, err.Error(), "customers", "the error names what was found")
	requireUntouched(t, path, before)

	// Still the owner's database: not switched to WAL, no seqbox table.
	ro, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer ro.Close()
	var mode string
	require.NoError(t, ro.QueryRow(`PRAGMA journal_mode`).Scan(&mode))
	require.Equal(t, "delete", mode)
	var n int
	require.NoError(t, ro.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'seqbox%'`).Scan(&n))
	require.Zero(t, n)
}

func TestOpenCreatesAndReopens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "seqbox.db")
	raw := []byte(`{"id":"evt-1","source":"crm","type":"task.create"}`)

	st, err := sqlite.Open(ctx, path)
	require.NoError(t, err)
	require.NoError(t, replay.EnsureRecordTables(ctx, st.DB()))
	c, err := seqbox.NewConsumer(seqbox.Config{Name: "c", Store: st, Handler: replay.RecordHandler("c")})
	require.NoError(t, err)
	results, err := c.Deliver(ctx, raw, 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Applied, results[0].Outcome)
	require.NoError(t, st.Close())

	// Reopened (also through a file: URI): the identity survived, and the
	// business tables beside seqbox's do not make it foreign.
	st, err = sqlite.Open(ctx, "file:"+path)
	require.NoError(t, err)
	defer st.Close()
	counts, err := st.Executor().Counts(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, int64(1), counts.InboxRows)
	c, err = seqbox.NewConsumer(seqbox.Config{Name: "c", Store: st, Handler: replay.RecordHandler("c")})
	require.NoError(t, err)
	results, err = c.Deliver(ctx, raw, 2)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Duplicate, results[0].Outcome)
	n, err := replay.Effects(ctx, st.DB(), "c")
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	// Opening the same file twice at once works too (two processes).
	other, err := sqlite.Open(ctx, path)
	require.NoError(t, err)
	require.NoError(t, other.Close())
}

func TestOpenEmptyFileIsInitialised(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seqbox.db")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	st, err := sqlite.Open(context.Background(), path)
	require.NoError(t, err)
	require.NoError(t, st.Close())
}

func TestOpenRefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "seqbox.db")
	st, err := sqlite.Open(ctx, path)
	require.NoError(t, err)
	var v string
	require.NoError(t, st.DB().QueryRow(`SELECT value FROM seqbox_meta WHERE name = 'schema_version'`).Scan(&v))
	require.NotEmpty(t, v)
	_, err = st.DB().Exec(`UPDATE seqbox_meta SET value = '999' WHERE name = 'schema_version'`)
	require.NoError(t, err)
	require.NoError(t, st.Close())

	st, err = sqlite.Open(ctx, path)
	require.ErrorIs(t, err, store.ErrSchemaTooNew)
	require.Nil(t, st)
	require.Contains(t, err.Error(), "999")

	// Refused, not downgraded.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.QueryRow(`SELECT value FROM seqbox_meta WHERE name = 'schema_version'`).Scan(&v))
	require.Equal(t, "999", v)
}

func TestDurabilitySettings(t *testing.T) {
	ctx := context.Background()
	st := openFresh(t)
	// Every connection of the pool gets the settings; check several at once.
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		conn, err := st.DB().Conn(ctx)
		require.NoError(t, err)
		defer conn.Close()
		conns[i] = conn
	}
	for _, conn := range conns {
		var mode string
		var sync, busy, fk int
		require.NoError(t, conn.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode))
		require.NoError(t, conn.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync))
		require.NoError(t, conn.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy))
		require.NoError(t, conn.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk))
		require.Equal(t, "wal", mode)
		require.Equal(t, 2, sync, "synchronous=FULL")
		require.GreaterOrEqual(t, busy, 1000, "a busy timeout, so writers queue instead of failing")
		require.Equal(t, 1, fk)
	}
}

// Close may be called more than once (an explicit Close and a deferred
// one): the second does nothing. It used to panic closing the grouped
// writes' channel again.
func TestCloseTwice(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NotPanics(t, func() { require.NoError(t, st.Close()) })
}
