package sqlitedb

import (
	"context"
	"fmt"
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

// A process that opens a database twice (a second pool: the embedded
// queue beside the store, a gateway's pools, a read-only look) keeps its
// locks on the file. The second open must not read the file outside
// SQLite: closing any descriptor of a file drops every POSIX lock the
// process holds on it, SQLite's included. A process left without its
// shared lock is invisible to others: the next one that closes its last
// connection cleanly believes itself the last, checkpoints and deletes
// the -wal and -shm under the first, whose later commits go to an
// unlinked -wal that other processes never read and a SIGKILL loses. (A
// chaos run saw it: a harness's reads stale for two minutes, "disk I/O
// error (522)" in serve.)
func TestASecondOpenKeepsTheProcessLocks(t *testing.T) {
	for _, second := range []store.Access{store.Adopt, store.ReadOnly, store.Exclusive} {
		t.Run(fmt.Sprint(second), func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "held.db")
			first, err := OpenAccess(ctx, path, store.Exclusive)
			require.NoError(t, err)
			defer first.Close()
			_, err = first.Exec(`CREATE TABLE t (i INTEGER PRIMARY KEY)`)
			require.NoError(t, err)
			_, err = first.Exec(`INSERT INTO t VALUES (1)`)
			require.NoError(t, err)

			again, err := OpenAccess(ctx, path, second)
			if second == store.Exclusive {
				// Refused or not, the look at the file drops no lock.
				if err == nil {
					again.Close()
				}
			} else {
				require.NoError(t, err)
				defer again.Close()
			}

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

// Two paths to one file, through a symlinked directory and a relative
// path, are one file held.
func TestHeldKeyMeetsThroughASymlinkedDirectory(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	require.NoError(t, os.Mkdir(real, 0o755))
	require.NoError(t, os.Symlink(real, filepath.Join(dir, "link")))
	t.Chdir(real)
	want := heldKey(filepath.Join(real, "x.db"))
	require.Equal(t, want, heldKey(filepath.Join(dir, "link", "x.db")))
	require.Equal(t, want, heldKey("x.db"))
	require.Equal(t, want, heldKey("./sub/../x.db"))
}

// The file stays held while any pool of the process is open: a pool
// closed does not end the hold of another, and a file no pool holds any
// more is read as before (its header checked).
func TestAFileIsHeldUntilItsLastPoolCloses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "held.db")
	first, err := OpenAccess(ctx, path, store.Adopt)
	require.NoError(t, err)
	defer first.Close()
	_, err = first.Exec(`CREATE TABLE t (i INTEGER PRIMARY KEY)`)
	require.NoError(t, err)
	second, err := OpenAccess(ctx, path, store.ReadOnly)
	require.NoError(t, err)
	require.NoError(t, second.Close())
	third, err := OpenAccess(ctx, path, store.Adopt)
	require.NoError(t, err)
	defer third.Close()

	require.Equal(t, "0", otherProcess(t, path))
	require.FileExists(t, path+"-wal", "another process's clean close took the -wal from under this one")

	require.NoError(t, third.Close())
	require.NoError(t, first.Close())
	held.Lock()
	_, still := held.files[heldKey(path)]
	held.Unlock()
	require.False(t, still, "no pool holds the file")
	st, err := examine(Target{Where: path, Path: path})
	require.NoError(t, err)
	require.True(t, st.wal, "read from the header")
	require.False(t, st.held)
}
