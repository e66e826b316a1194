package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

// rawDB builds a database the way another program would: the driver
// straight, rollback-journal mode unless the statements change it.
func rawDB(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, s := range stmts {
		_, err := db.Exec(s)
		require.NoError(t, err, s)
	}
}

// catalog is everything in sqlite_master that is not seqbox's, the
// pragmas an application sets, and the rows of crm_tasks when it exists.
func catalog(t *testing.T, path string, withRows bool) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var out []string
	rows, err := db.Query(`SELECT type || ' ' || name || ' ' || tbl_name || ' ' || COALESCE(sql, '') FROM sqlite_master
		WHERE name NOT LIKE 'seqbox\_%' ESCAPE '\' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	for _, p := range []string{"user_version", "application_id"} {
		var v string
		require.NoError(t, db.QueryRow(`PRAGMA `+p).Scan(&v))
		out = append(out, p+"="+v)
	}
	var n int
	if db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'crm_tasks'`).Scan(&n); withRows && n == 1 {
		rows, err := db.Query(`SELECT id || ':' || title FROM crm_tasks ORDER BY id`)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out = append(out, "crm_tasks "+s)
		}
	}
	return out
}

func journalMode(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	if b[18] == 2 {
		return "wal"
	}
	return "rollback"
}

var allAccess = []store.Access{store.Adopt, store.Exclusive, store.ReadOnly}

// Files that are not SQLite databases are refused in every mode, before
// any driver opens them.
func TestEveryModeRefusesANonSQLiteFile(t *testing.T) {
	for name, content := range map[string][]byte{
		"one byte":             {'x'},
		"one zero byte":        {0},
		"half a header":        []byte("SQLite for"),
		"header only":          []byte("SQLite format 3\x00"),
		"header and garbage":   append([]byte("SQLite format 3\x00"), []byte(strings.Repeat("garbage!", 512))...),
		"text":                 []byte("name,qty\nwidget,10\n"),
		"almost the header":    append([]byte("SQLite format 4\x00"), make([]byte, 4096)...),
		"header, zeroed pages": append([]byte("SQLite format 3\x00"), make([]byte, 8192)...),
	} {
		for _, access := range allAccess {
			t.Run(name+"/"+access.String(), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "seqbox.db")
				require.NoError(t, os.WriteFile(path, content, 0o600))
				st, err := sqlite.OpenWith(context.Background(), path, sqlite.Options{Access: access})
				require.ErrorIs(t, err, store.ErrForeignDatabase)
				require.Nil(t, st)
				require.Contains(t, err.Error(), path, "the error names the file")
				requireUntouched(t, path, content)
			})
		}
	}
}

// The holes of the old guard: SQLite databases without an application
// table are an application's all the same.
func TestExclusiveRefusesForeignDatabasesUntouched(t *testing.T) {
	for _, c := range []struct {
		name  string
		stmts []string
		found string
	}{
		{"a table", []string{`CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)`, `INSERT INTO customers (name) VALUES ('Júpiter')`}, "table customers"},
		{"only a view", []string{`CREATE VIEW answer AS SELECT 42 AS n`}, "view answer"},
		{"a view named like seqbox's", []string{`CREATE VIEW seqbox_inbox AS SELECT 1 AS n`}, "view seqbox_inbox"},
		{"a trigger on a seqbox-named table", []string{`CREATE TABLE seqbox_x (a)`,
			`CREATE TRIGGER audit AFTER INSERT ON seqbox_x BEGIN SELECT 1; END`}, "trigger audit"},
		{"an index on a seqbox-named table", []string{`CREATE TABLE seqbox_x (a)`, `CREATE INDEX by_a ON seqbox_x (a)`}, "index by_a"},
		{"a trigger named as the queue's on another table", []string{`CREATE TABLE seqbox_x (a)`,
			`CREATE TRIGGER seqbox_queue_behind_insert AFTER INSERT ON seqbox_x BEGIN SELECT 1; END`}, "trigger seqbox_queue_behind_insert"},
		{"a seqbox-named trigger on the queue", []string{`CREATE TABLE seqbox_queue (a)`,
			`CREATE TRIGGER seqbox_queue_audit AFTER INSERT ON seqbox_queue BEGIN SELECT 1; END`}, "trigger seqbox_queue_audit"},
		{"user_version only", []string{`PRAGMA user_version = 7`}, "user_version=7"},
		{"application_id only", []string{`PRAGMA application_id = 1234`}, "application_id=1234"},
		{"a WAL-mode database", []string{`PRAGMA journal_mode = WAL`, `CREATE TABLE notes (body TEXT)`}, "table notes"},
		{"a WAL-mode view", []string{`PRAGMA journal_mode = WAL`, `CREATE VIEW v AS SELECT 1`}, "view v"},
		{"only a seqbox-named table, no seqbox_meta", []string{`CREATE TABLE seqbox_inbox (x)`}, "table seqbox_inbox"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.db")
			rawDB(t, path, c.stmts...)
			before, err := os.ReadFile(path)
			require.NoError(t, err)
			mode := journalMode(t, path)

			st, err := sqlite.OpenWith(context.Background(), path, sqlite.Options{Access: store.Exclusive})
			require.ErrorIs(t, err, store.ErrForeignDatabase)
			require.Nil(t, st)
			require.Contains(t, err.Error(), path, "the error names the file")
			require.Contains(t, err.Error(), c.found, "the error says what was found")
			requireUntouched(t, path, before)
			require.Equal(t, mode, journalMode(t, path))
		})
	}
}

// A database the library adopted is the application's from then on: the
// CLI's creating commands refuse it.
func TestExclusiveRefusesAnAdoptedDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	st, err := sqlite.Open(ctx, path)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	st, err = sqlite.OpenWith(ctx, path, sqlite.Options{Access: store.Exclusive})
	require.ErrorIs(t, err, store.ErrForeignDatabase)
	require.Nil(t, st)
	require.Contains(t, err.Error(), "adopted")
	requireUntouched(t, path, before)
}

// What an exclusive open accepts: nothing yet, an empty file, and a
// database that is seqbox's, with its built-in handlers' tables beside.
func TestExclusiveAcceptsEmptyOrSeqboxDatabases(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T, path string) {
		t.Helper()
		st, err := sqlite.OpenWith(ctx, path, sqlite.Options{Access: store.Exclusive})
		require.NoError(t, err)
		require.NoError(t, st.Close())
	}
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "new.db")
		open(t, path)
		open(t, path) // and again: it is seqbox's now
	})
	t.Run("empty file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "empty.db")
		require.NoError(t, os.WriteFile(path, nil, 0o600))
		open(t, path)
	})
	t.Run("seqbox's, with the record handler's tables", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "seqbox.db")
		open(t, path)
		rawDB(t, path, `CREATE TABLE seqbox_record_effects (consumer TEXT, source TEXT, id TEXT)`)
		open(t, path)
	})
	t.Run("only seqbox-named tables (an embedded queue's file)", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "queue.db")
		rawDB(t, path, `PRAGMA journal_mode = WAL`, `CREATE TABLE seqbox_queue (seq INTEGER PRIMARY KEY AUTOINCREMENT, body BLOB)`,
			`CREATE INDEX seqbox_queue_ready ON seqbox_queue (seq)`)
		open(t, path)
	})
	t.Run("written by an older seqbox (no owner recorded)", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "old.db")
		open(t, path)
		rawDB(t, path, `DELETE FROM seqbox_meta WHERE name = 'owner'`, `CREATE TABLE chaos_fixed (id TEXT)`)
		open(t, path)
	})
}

// Adopt: the application's database gets seqbox's tables beside its own,
// and the handler writes its business rows in the inbox's transaction.
func TestAdoptKeepsTheApplicationsObjects(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "crm.db")
	rawDB(t, path,
		`CREATE TABLE crm_tasks (id INTEGER PRIMARY KEY, title TEXT NOT NULL)`,
		`INSERT INTO crm_tasks (title) VALUES ('call Acme'), ('send proposal')`,
		`CREATE INDEX crm_tasks_title ON crm_tasks (title)`,
		`CREATE VIEW open_tasks AS SELECT * FROM crm_tasks`,
		`CREATE TRIGGER crm_tasks_audit AFTER DELETE ON crm_tasks BEGIN SELECT 1; END`,
		`PRAGMA user_version = 7`,
		`PRAGMA application_id = 4242`)
	before := catalog(t, path, true)

	st, err := sqlite.Open(ctx, path)
	require.NoError(t, err, "the application's own database is adopted")
	require.Equal(t, before, catalog(t, path, true), "nothing of the application's changed")
	require.Equal(t, "wal", journalMode(t, path), "the adopted file is switched to WAL, as documented")

	var seqboxTables int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'seqbox\_%' ESCAPE '\'`).Scan(&seqboxTables))
	require.Greater(t, seqboxTables, 5)

	c, err := seqbox.NewConsumer(seqbox.Config{Name: "crm", Store: st,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO crm_tasks (title) VALUES ($1)`, "follow up "+ev.PartitionKey)
			return err
		}})
	require.NoError(t, err)
	msg := []byte(`{"specversion":"1.0","id":"evt-1","source":"crm","type":"followup","partitionkey":"opp-1","objectversion":1}`)
	for attempt := 1; attempt <= 2; attempt++ {
		_, err := c.Deliver(ctx, msg, attempt)
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM crm_tasks`).Scan(&n))
	require.Equal(t, 3, n, "one task for two deliveries")
	require.NoError(t, st.Close())

	// Reopened: still the application's database, still adopted.
	st, err = sqlite.Open(ctx, path)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.Equal(t, catalog(t, path, false), before[:len(before)-2], "the application's schema and pragmas are as they were")
}

// A path is a path: '#', '?' and '%' are part of the file name.
func TestPathsAreFileNames(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"app.db#", "app%2Edb", "a?b.db", "100%.db", "x#y?z%41.db", "with space.db", "ünïcode.db", "a&mode=ro.db", "?.db"} {
		for _, access := range []store.Access{store.Adopt, store.Exclusive} {
			t.Run(name+"/"+access.String(), func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, name)
				st, err := sqlite.OpenWith(ctx, path, sqlite.Options{Access: access})
				require.NoError(t, err)
				require.NoError(t, st.Close())
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				require.Len(t, entries, 1, "exactly one file, no WAL left behind after close")
				require.Equal(t, name, entries[0].Name())
				require.Equal(t, "wal", journalMode(t, path))

				// And it reopens read-only under the same name.
				st, err = sqlite.OpenWith(ctx, path, sqlite.Options{Access: store.ReadOnly})
				require.NoError(t, err)
				require.NoError(t, st.Close())
				_, err = os.Stat(filepath.Join(dir, "app.db"))
				require.True(t, errors.Is(err, fs.ErrNotExist), "app.db must not be created")
			})
		}
	}
	t.Run("relative", func(t *testing.T) {
		dir := t.TempDir()
		t.Chdir(dir)
		st, err := sqlite.Open(ctx, "app.db#")
		require.NoError(t, err)
		require.NoError(t, st.Close())
		_, err = os.Stat(filepath.Join(dir, "app.db#"))
		require.NoError(t, err)
		_, err = os.Stat(filepath.Join(dir, "app.db"))
		require.True(t, errors.Is(err, fs.ErrNotExist))
	})
	t.Run("an existing foreign file of that name is checked, not another", func(t *testing.T) {
		dir := t.TempDir()
		// app.db is somebody's database; app.db# is seqbox's.
		rawDB(t, filepath.Join(dir, "app.db"), `CREATE TABLE customers (id INTEGER)`)
		before, err := os.ReadFile(filepath.Join(dir, "app.db"))
		require.NoError(t, err)
		st, err := sqlite.OpenWith(ctx, filepath.Join(dir, "app.db#"), sqlite.Options{Access: store.Exclusive})
		require.NoError(t, err)
		require.NoError(t, st.Close())
		requireUntouched(t, filepath.Join(dir, "app.db"), before)
		st, err = sqlite.OpenWith(ctx, filepath.Join(dir, "app%2Edb"), sqlite.Options{Access: store.Exclusive})
		require.NoError(t, err)
		require.NoError(t, st.Close())
		requireUntouched(t, filepath.Join(dir, "app.db"), before)
		// And the foreign one is refused by its own name.
		_, err = sqlite.OpenWith(ctx, filepath.Join(dir, "app.db"), sqlite.Options{Access: store.Exclusive})
		require.ErrorIs(t, err, store.ErrForeignDatabase)
		requireUntouched(t, filepath.Join(dir, "app.db"), before)
	})
}

// A file: URI is a SQLite URI, passed through as written.
func TestFileURIIsPassedThrough(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, "file:"+dir+"/uri%23.db?cache=private")
	require.NoError(t, err)
	require.NoError(t, st.Close())
	_, err = os.Stat(filepath.Join(dir, "uri#.db"))
	require.NoError(t, err, "the URI's %23 is decoded by SQLite")

	st, err = sqlite.OpenWith(ctx, "file://"+dir+"/uri%23.db", sqlite.Options{Access: store.ReadOnly})
	require.NoError(t, err)
	require.NoError(t, st.Close())

	// The guard applies to the file the URI names.
	rawDB(t, filepath.Join(dir, "app.db"), `CREATE VIEW v AS SELECT 1`)
	before, err := os.ReadFile(filepath.Join(dir, "app.db"))
	require.NoError(t, err)
	_, err = sqlite.OpenWith(ctx, "file:"+dir+"/app.db", sqlite.Options{Access: store.Exclusive})
	require.ErrorIs(t, err, store.ErrForeignDatabase)
	requireUntouched(t, filepath.Join(dir, "app.db"), before)

	_, err = sqlite.Open(ctx, "file://example.com/x.db")
	require.ErrorContains(t, err, "host")
}

func TestOtherSchemesAreRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, v := range []string{"mysql://x", "sqlite://x", "sqlite:///tmp/x.db", "FILE://x"} {
		_, err := sqlite.Open(context.Background(), v)
		require.ErrorContains(t, err, "unsupported scheme")
		require.ErrorContains(t, err, "seqbox stores are a SQLite file path or a postgres:// URL")
	}
	_, err := sqlite.Open(context.Background(), "postgres://u:secret@h/db")
	require.ErrorContains(t, err, "PostgreSQL")
	require.NotContains(t, err.Error(), "secret")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// seqboxFile creates a seqbox database with one inbox row for consumer c
// and returns its path; the file is closed (no -wal, no -shm).
func seqboxFile(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "seqbox.db")
	st, err := sqlite.OpenWith(context.Background(), path, sqlite.Options{Access: store.Exclusive})
	require.NoError(t, err)
	deliver(t, st, "evt-1")
	require.NoError(t, st.Close())
	return path
}

func deliver(t *testing.T, st store.Store, id string) {
	t.Helper()
	c, err := seqbox.NewConsumer(seqbox.Config{Name: "c", Store: st,
		Handler: func(context.Context, seqbox.Tx, seqboxtype.Event) error { return nil }})
	require.NoError(t, err)
	results, err := c.Deliver(context.Background(), []byte(`{"specversion":"1.0","id":"`+id+`","source":"s","type":"t"}`), 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Applied, results[0].Outcome)
}

func inboxRows(t *testing.T, st store.Store) int64 {
	t.Helper()
	counts, err := st.Executor().Counts(context.Background(), "c")
	require.NoError(t, err)
	return counts.InboxRows
}

// requireNoWrites checks that the store's pool cannot write.
func requireNoWrites(t *testing.T, st store.Store) {
	t.Helper()
	_, err := st.DB().Exec(`INSERT INTO seqbox_meta (name, value) VALUES ('x', 'y')`)
	require.Error(t, err, "a read-only store must not write")
	_, err = st.DB().Exec(`CREATE TABLE x (a)`)
	require.Error(t, err, "a read-only store must not write")
}

// readOnlyReads opens path read-only, reads its one inbox row, checks
// that writes fail, and that the file is byte for byte as it was.
func readOnlyReads(t *testing.T, path string) {
	t.Helper()
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	st, err := sqlite.OpenWith(context.Background(), path, sqlite.Options{Access: store.ReadOnly})
	require.NoError(t, err)
	require.Equal(t, int64(1), inboxRows(t, st))
	requireNoWrites(t, st)
	require.NoError(t, st.Close())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, got)
}

func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	ro := sqlite.Options{Access: store.ReadOnly}

	t.Run("missing file is not created", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "typo.db")
		_, err := sqlite.OpenWith(ctx, path, ro)
		require.ErrorIs(t, err, fs.ErrNotExist)
		require.Contains(t, err.Error(), path)
		_, err = os.Stat(path)
		require.True(t, errors.Is(err, fs.ErrNotExist))
	})
	t.Run("empty file stays empty", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "empty.db")
		require.NoError(t, os.WriteFile(path, nil, 0o600))
		_, err := sqlite.OpenWith(ctx, path, ro)
		require.EqualError(t, err, path+" holds no seqbox data (no seqbox_meta)")
		requireUntouched(t, path, []byte{})
	})
	t.Run("application database without seqbox", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "crm.db")
		rawDB(t, path, `CREATE TABLE crm_tasks (id INTEGER PRIMARY KEY, title TEXT)`)
		before, err := os.ReadFile(path)
		require.NoError(t, err)
		_, err = sqlite.OpenWith(ctx, path, ro)
		require.EqualError(t, err, path+" holds no seqbox data (no seqbox_meta)")
		requireUntouched(t, path, before)
	})
	t.Run("rollback-journal seqbox database gets no file beside it", func(t *testing.T) {
		path := seqboxFile(t, t.TempDir())
		rawDB(t, path, `PRAGMA journal_mode = DELETE`)
		require.Equal(t, "rollback", journalMode(t, path))
		before, err := os.ReadFile(path)
		require.NoError(t, err)
		st, err := sqlite.OpenWith(ctx, path, ro)
		require.NoError(t, err)
		require.Equal(t, int64(1), inboxRows(t, st))
		requireNoWrites(t, st)
		require.NoError(t, st.Close())
		requireUntouched(t, path, before)
	})
	t.Run("read-only file", func(t *testing.T) {
		path := seqboxFile(t, t.TempDir())
		require.NoError(t, os.Chmod(path, 0o444))
		readOnlyReads(t, path)
		require.Equal(t, "wal", journalMode(t, path), "not switched")
	})
	t.Run("read-only directory", func(t *testing.T) {
		// As root the permissions are not enforced; run the tests as
		// another user to see the immutable fallback at work.
		dir := t.TempDir()
		path := seqboxFile(t, dir)
		require.NoError(t, os.Chmod(path, 0o444))
		require.NoError(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		readOnlyReads(t, path)
	})
	t.Run("committed data still in the -wal is seen", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "seqbox.db")
		w, err := sqlite.OpenWith(ctx, path, sqlite.Options{Access: store.Exclusive})
		require.NoError(t, err)
		defer w.Close()
		deliver(t, w, "evt-1")
		deliver(t, w, "evt-2")
		st, err := os.Stat(path + "-wal")
		require.NoError(t, err)
		require.Positive(t, st.Size(), "the writer's transactions are in the -wal")

		r, err := sqlite.OpenWith(ctx, path, ro)
		require.NoError(t, err)
		require.Equal(t, int64(2), inboxRows(t, r))
		deliver(t, w, "evt-3")
		require.Equal(t, int64(3), inboxRows(t, r), "and what is committed meanwhile")
		require.NoError(t, r.Close())

		// A copy taken while the writer runs (as after a crash), in a
		// read-only directory: read through its -wal and -shm.
		cp := t.TempDir()
		for _, suffix := range []string{"", "-wal", "-shm"} {
			b, err := os.ReadFile(path + suffix)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(cp, "seqbox.db"+suffix), b, 0o444))
		}
		require.NoError(t, os.Chmod(cp, 0o555))
		t.Cleanup(func() { os.Chmod(cp, 0o755) })
		r, err = sqlite.OpenWith(ctx, filepath.Join(cp, "seqbox.db"), ro)
		require.NoError(t, err)
		require.Equal(t, int64(3), inboxRows(t, r))
		require.NoError(t, r.Close())

		// Without the -shm, SQLite must create one to read the -wal, and a
		// read-only open writes nothing: that is an error that says so,
		// never a read of the main file alone that would miss what is
		// committed.
		noShm := t.TempDir()
		for _, suffix := range []string{"", "-wal"} {
			b, err := os.ReadFile(path + suffix)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(noShm, "seqbox.db"+suffix), b, 0o444))
		}
		require.NoError(t, os.Chmod(noShm, 0o555))
		t.Cleanup(func() { os.Chmod(noShm, 0o755) })
		_, err = sqlite.OpenWith(ctx, filepath.Join(noShm, "seqbox.db"), ro)
		require.ErrorContains(t, err, "seqbox.db-wal")
		_, err = os.Stat(filepath.Join(noShm, "seqbox.db-shm"))
		require.True(t, os.IsNotExist(err), "no -shm was created")
	})
	t.Run("newer schema", func(t *testing.T) {
		path := seqboxFile(t, t.TempDir())
		rawDB(t, path, `UPDATE seqbox_meta SET value = '999' WHERE name = 'schema_version'`)
		_, err := sqlite.OpenWith(ctx, path, ro)
		require.ErrorIs(t, err, store.ErrSchemaTooNew)
	})
	t.Run("older schema is not migrated", func(t *testing.T) {
		path := seqboxFile(t, t.TempDir())
		rawDB(t, path, `UPDATE seqbox_meta SET value = '1' WHERE name = 'schema_version'`)
		_, err := sqlite.OpenWith(ctx, path, ro)
		require.ErrorContains(t, err, "does not migrate")
		db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
		require.NoError(t, err)
		defer db.Close()
		var v string
		require.NoError(t, db.QueryRow(`SELECT value FROM seqbox_meta WHERE name = 'schema_version'`).Scan(&v))
		require.Equal(t, "1", v)
	})
}

// A database seqbox created holds seqbox's tables and its CLI handlers'
// record_* tables; anything an application added since makes it the
// application's, and the creating commands leave it untouched.
func TestExclusiveRefusesASeqboxDatabaseWithOtherObjects(t *testing.T) {
	for _, c := range []struct{ name, stmt, found string }{
		{"a table", `CREATE TABLE app (x)`, "table app"},
		{"a view", `CREATE VIEW v AS SELECT 1`, "view v"},
		{"an index on seqbox's table", `CREATE INDEX mine ON seqbox_inbox (source)`, "index mine"},
		{"a trigger on seqbox's table", `CREATE TRIGGER tr AFTER INSERT ON seqbox_inbox BEGIN SELECT 1; END`, "trigger tr"},
		{"user_version", `PRAGMA user_version = 9`, "user_version=9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := seqboxFile(t, t.TempDir())
			rawDB(t, path, `CREATE TABLE seqbox_record_effects (n)`, c.stmt) // closing checkpoints and removes the -wal
			before, err := os.ReadFile(path)
			require.NoError(t, err)
			_, err = sqlite.OpenWith(context.Background(), path, sqlite.Options{Access: store.Exclusive})
			require.ErrorIs(t, err, store.ErrForeignDatabase)
			require.Contains(t, err.Error(), c.found)
			require.NotContains(t, err.Error(), "seqbox_record_effects", "the CLI's own handler tables are seqbox's")
			requireUntouched(t, path, before)
		})
	}
}

// A WAL-mode database whose -wal holds transactions and has no -shm
// cannot be read without creating one: refused, and nothing is created.
func TestExclusiveRefusesAPendingWALWithoutCreatingShm(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.db")
	rawDB(t, path, `PRAGMA journal_mode = WAL`, `PRAGMA wal_autocheckpoint = 0`, `CREATE TABLE secret (x)`)
	// Keep the -wal as a crashed writer leaves it, without the -shm.
	src := filepath.Join(t.TempDir(), "src.db")
	rawDB(t, src, `PRAGMA journal_mode = WAL`, `PRAGMA wal_autocheckpoint = 0`, `CREATE TABLE secret (x)`)
	db, err := sql.Open("sqlite", src)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO secret VALUES (1)`)
	require.NoError(t, err)
	main, err := os.ReadFile(src)
	require.NoError(t, err)
	wal, err := os.ReadFile(src + "-wal")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.NotEmpty(t, wal)
	require.NoError(t, os.WriteFile(path, main, 0o600))
	require.NoError(t, os.WriteFile(path+"-wal", wal, 0o600))
	os.Remove(path + "-shm")

	_, err = sqlite.OpenWith(context.Background(), path, sqlite.Options{Access: store.Exclusive})
	require.ErrorIs(t, err, store.ErrForeignDatabase)
	_, err = os.Stat(path + "-shm")
	require.True(t, os.IsNotExist(err), "no -shm was created")
	got, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	require.Equal(t, wal, got)
}

// Reading a WAL-mode database that no connection has open creates no
// -wal or -shm: another user's inspection must not leave files behind
// that lock the owner out.
func TestReadOnlyCreatesNoSiblings(t *testing.T) {
	path := seqboxFile(t, t.TempDir())
	for _, s := range []string{"-wal", "-shm"} {
		_, err := os.Stat(path + s)
		require.True(t, os.IsNotExist(err), "a closed database leaves no %s", s)
	}
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	st, err := sqlite.OpenWith(context.Background(), path, sqlite.Options{Access: store.ReadOnly})
	require.NoError(t, err)
	require.Equal(t, int64(1), inboxRows(t, st))
	require.NoError(t, st.Close())
	requireUntouched(t, path, before)
}
