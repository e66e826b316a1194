package sqlitedb

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbox/seqbox/internal/pastetest"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// otherProcess reads the database at path in a process of its own, with
// the SQLite every other tool uses (Python's sqlite3 module: the system's
// libsqlite3, as the sqlite3 shell, a DB browser or a backup tool), and
// closes it cleanly. Its close is where a process that believes itself
// the last checkpoints and deletes the -wal and -shm.
// It returns how many rows it found in table t.
func otherProcess(t *testing.T, path string) string {
	t.Helper()
	pastetest.Need(t, "a second process with the system's SQLite", "python3")
	out, err := exec.Command("python3", "-c", `import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(c.execute("SELECT COUNT(*) FROM t").fetchone()[0])
c.close()`, path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.TrimSpace(string(out))
}

// A process that opens a database again keeps its locks on the file: a
// second pool of seqbox's (the embedded queue beside the store, a
// gateway's pools, a read-only look, an exclusive open refused), one
// through a symlink to the file (a hard link SQLite itself refuses: its
// -wal would be another file), one after the application's own pool,
// or after a pool closed while one of its connections was still out. The
// open must not read the file outside SQLite: closing any descriptor of a
// file drops every POSIX lock the process holds on it, SQLite's included,
// and SQLite never takes them again. A process left without its shared
// lock is invisible to others: the next one that closes its last
// connection cleanly believes itself the last, checkpoints and deletes
// the -wal and -shm under the first, whose later commits go to an
// unlinked -wal that other processes never read and a SIGKILL loses. (A
// chaos run saw it: the harness's reads stale for two minutes, "disk I/O
// error (522)" in serve; docs/design.md §15.1.)
func TestASecondOpenKeepsTheProcessLocks(t *testing.T) {
	ctx := context.Background()
	type pool interface {
		Exec(string, ...any) (sql.Result, error)
	}
	// first opens the file as the process's first user of it.
	seqbox := func(t *testing.T, path string) pool {
		db, err := OpenAccess(ctx, path, store.Exclusive)
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		return db
	}
	for _, c := range []struct {
		name  string
		first func(t *testing.T, path string) pool
		again func(t *testing.T, path string)
	}{
		{"adopt", seqbox, func(t *testing.T, path string) { open(t, path, store.Adopt) }},
		{"read-only", seqbox, func(t *testing.T, path string) { open(t, path, store.ReadOnly) }},
		{"exclusive, refused", seqbox, func(t *testing.T, path string) {
			_, err := OpenAccess(ctx, path, store.Exclusive)
			require.ErrorIs(t, err, store.ErrForeignDatabase) // table t is not seqbox's
		}},
		{"through a symlink", seqbox, func(t *testing.T, path string) {
			link := filepath.Join(t.TempDir(), "link.db")
			require.NoError(t, os.Symlink(path, link))
			open(t, link, store.Adopt)
		}},
		{"after the application's own pool", func(t *testing.T, path string) pool {
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			return db
		}, func(t *testing.T, path string) { open(t, path, store.Adopt) }},
		{"after a pool closed with a connection out", func(t *testing.T, path string) pool {
			db := seqbox(t, path)
			return db
		}, func(t *testing.T, path string) {
			other, err := OpenAccess(ctx, path, store.Adopt)
			require.NoError(t, err)
			conn, err := other.Conn(ctx)
			require.NoError(t, err)
			var n int
			require.NoError(t, conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM t`).Scan(&n))
			require.NoError(t, other.Close()) // its connection is still out
			open(t, path, store.Adopt)
			t.Cleanup(func() { conn.Close() })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "locked.db")
			first := c.first(t, path)
			_, err := first.Exec(`CREATE TABLE t (i INTEGER PRIMARY KEY)`)
			require.NoError(t, err)
			_, err = first.Exec(`INSERT INTO t VALUES (1)`)
			require.NoError(t, err)

			c.again(t, path)

			require.Equal(t, "1", otherProcess(t, path))
			require.FileExists(t, path+"-wal", "another process's clean close took the -wal from under this one")
			require.FileExists(t, path+"-shm")
			// And what this process commits now, other processes see.
			_, err = first.Exec(`INSERT INTO t VALUES (2)`)
			require.NoError(t, err)
			require.Equal(t, "2", otherProcess(t, path))
		})
	}
}

// open opens path with access, closed when the test ends.
func open(t *testing.T, path string, access store.Access) {
	t.Helper()
	db, err := OpenAccess(context.Background(), path, access)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
}

// The header is read through SQLite and still says what it said: a WAL
// file's flag, a rollback-journal file's, and a foreign file refused
// untouched, with no file created beside any of them.
func TestExamineReadsTheHeaderThroughSQLite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wal := filepath.Join(dir, "wal.db")
	db, err := OpenAccess(ctx, wal, store.Adopt)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE t (i INTEGER)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	st, err := examine(ctx, Target{Where: wal, Path: wal})
	require.NoError(t, err)
	require.True(t, st.wal)

	journal := filepath.Join(dir, "journal.db")
	rb, err := sql.Open("sqlite", "file:"+journal)
	require.NoError(t, err)
	_, err = rb.Exec(`CREATE TABLE t (i INTEGER)`)
	require.NoError(t, err)
	require.NoError(t, rb.Close())
	st, err = examine(ctx, Target{Where: journal, Path: journal})
	require.NoError(t, err)
	require.False(t, st.wal)

	foreign := filepath.Join(dir, "notes.txt")
	body := []byte(strings.Repeat("not a database, long enough for a header. ", 10))
	require.NoError(t, os.WriteFile(foreign, body, 0o600))
	_, err = examine(ctx, Target{Where: foreign, Path: foreign})
	require.ErrorIs(t, err, store.ErrForeignDatabase)
	require.ErrorContains(t, err, "SQLite reads no database header in it")
	short := filepath.Join(dir, "short.db")
	require.NoError(t, os.WriteFile(short, []byte("SQLite format 3\x00"), 0o600))
	_, err = examine(ctx, Target{Where: short, Path: short})
	require.ErrorContains(t, err, "16 bytes, shorter than a SQLite header")
	hundred := filepath.Join(dir, "hundred.db")
	require.NoError(t, os.WriteFile(hundred, []byte(strings.Repeat("x", 100)), 0o600))
	_, err = examine(ctx, Target{Where: hundred, Path: hundred})
	require.ErrorContains(t, err, "SQLite reads no database header in it", "100 bytes is a header's length")
	// The magic string alone is not a header.
	magic := filepath.Join(dir, "magic.db")
	require.NoError(t, os.WriteFile(magic, append([]byte("SQLite format 3\x00"), []byte(strings.Repeat("\x01", 4000))...), 0o600))
	_, err = examine(ctx, Target{Where: magic, Path: magic})
	require.ErrorIs(t, err, store.ErrForeignDatabase)
	missing := filepath.Join(dir, "no-such-dir", "x.db")
	_, err = examine(ctx, Target{Where: missing, Path: missing})
	require.ErrorContains(t, err, "directory of "+missing+" does not exist")

	got, err := os.ReadFile(foreign)
	require.NoError(t, err)
	require.Equal(t, body, got)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"wal.db", "journal.db", "notes.txt", "short.db", "hundred.db", "magic.db"}, names)
}

// A file in use reads as its users see it, through its -wal: the header
// read of an open (examine) must not take the main file alone for the
// database while a process has it open. The main file alone is only
// consistent between checkpoints; in the middle of one (pages copied in
// page order) its schema can point at pages not copied yet, and SQLite
// read it as "database disk image is malformed", refusing a healthy
// database (a chaos run's harness failed so at 8486302). Here the main
// file's schema page is garbage the -wal supersedes, as a checkpoint
// half done can leave it.
func TestExamineReadsAFileInUseThroughItsWAL(t *testing.T) {
	pastetest.Need(t, "a second process to write the main file", "python3")
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "live.db")
	db, err := OpenAccess(ctx, path, store.Exclusive)
	require.NoError(t, err)
	defer db.Close()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	for _, stmt := range []string{`PRAGMA wal_autocheckpoint = 0`, `CREATE TABLE a (i INTEGER)`,
		`PRAGMA wal_checkpoint(TRUNCATE)`, `CREATE TABLE b (i INTEGER)`} {
		_, err := conn.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	// Garbage over the main file's page 1 past its header: the -wal
	// holds that page's current version.
	out, err := exec.Command("python3", "-c", `import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(100)
    f.write(b"\xff" * 3000)`, path).CombinedOutput()
	require.NoError(t, err, "%s", out)

	st, err := examine(ctx, Target{Where: path, Path: path})
	require.NoError(t, err)
	require.True(t, st.wal)
	open(t, path, store.ReadOnly)
}
