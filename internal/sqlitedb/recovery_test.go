package sqlitedb

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/seqbox/seqbox/internal/pastetest"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// crashedWriter leaves the database at path as a process killed mid-work
// leaves it: rows committed in its -wal, never checkpointed, the -wal and
// -shm beside the file. The writer is Python's sqlite3 (the system's
// libsqlite3), SIGKILLed by itself after its commit.
func crashedWriter(t *testing.T, path string, rows int) {
	t.Helper()
	pastetest.Need(t, "a second process with the system's SQLite", "python3")
	out, err := exec.Command("python3", "-c", `import os, signal, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("PRAGMA journal_mode=WAL")
c.execute("PRAGMA wal_autocheckpoint=0")
c.execute("CREATE TABLE t (x INTEGER)")
c.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(int(sys.argv[2]))])
c.commit()
os.kill(os.getpid(), signal.SIGKILL)`, path, strconv.Itoa(rows)).CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.True(t, hasContent(path+"-wal"), "the killed writer left its -wal")
}

// recovering is another process in the middle of SQLite's WAL recovery
// of the database at path: it holds the -shm's locks a recovering
// connection holds (its dead-man switch shared, the WAL write lock and
// the recovery lock exclusive), over a wal-index whose header is not yet
// valid, as a process that opened the file first after a crash holds
// them while it rebuilds the index. It lets them go when release is
// called.
func recovering(t *testing.T, path string) (release func()) {
	t.Helper()
	shm := path + "-shm"
	// The header of the wal-index, not yet rebuilt: every reader must
	// recover it, or wait for whoever does.
	f, err := os.OpenFile(shm, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 136), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	cmd := exec.Command("python3", "-c", `import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_SH, 1, 128)  # the dead-man switch: a connection is open
fcntl.lockf(fd, fcntl.LOCK_EX, 1, 120)  # WAL_WRITE_LOCK
fcntl.lockf(fd, fcntl.LOCK_EX, 1, 122)  # WAL_RECOVER_LOCK
print("held", flush=True)
sys.stdin.read()`, shm)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "held\n", line)
	released := false
	release = func() {
		if !released {
			released = true
			stdin.Close()
			require.NoError(t, cmd.Wait())
		}
	}
	t.Cleanup(release)
	return release
}

// An open that meets another process recovering the file's WAL (the
// first to open it after a crash) waits for it, as it waits for any
// writer, instead of failing: the header read before the pool opens
// (firstPage) had no busy timeout, and a chaos run's harness, opening the
// file right after SIGKILLing both serve processes while its own reader
// recovered it, failed with "database is locked (261)"
// (SQLITE_BUSY_RECOVERY).
func TestOpenWaitsForARecoveryElsewhere(t *testing.T) {
	prevTimeout, prevContention := busyTimeoutMS, onContention
	t.Cleanup(func() { busyTimeoutMS, onContention = prevTimeout, prevContention })
	busyTimeoutMS = 20
	waiting := make(chan struct{}, 1)
	onContention = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}

	for name, access := range map[string]store.Access{"adopt": store.Adopt, "read-only": store.ReadOnly} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "crashed.db")
			crashedWriter(t, path, 500)
			release := recovering(t, path)

			type opened struct {
				n   int
				err error
			}
			done := make(chan opened, 1)
			go func() {
				db, err := OpenAccess(context.Background(), path, access)
				if err != nil {
					done <- opened{err: err}
					return
				}
				defer db.Close()
				var n int
				err = db.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n)
				done <- opened{n: n, err: err}
			}()
			select {
			case r := <-done:
				t.Fatalf("the open ended while another process recovered the file (n=%d): %v", r.n, r.err)
			case <-waiting:
			}
			release()
			r := <-done
			require.NoError(t, r.err)
			require.Equal(t, 500, r.n, "every row the killed writer committed, read through its -wal")
		})
	}
}
