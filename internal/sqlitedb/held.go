package sqlitedb

import (
	"database/sql"
	"database/sql/driver"
	"path/filepath"
	"sync"

	"modernc.org/sqlite"
)

// A process must never open and close a database file outside SQLite
// while SQLite holds locks on it: closing any descriptor of a file drops
// every POSIX lock the process holds on that file, SQLite's included, and
// SQLite, which counts its locks per file in the process, never takes
// them again. A seqbox process left so holds no shared lock on its
// database: the next process that closes its last connection to it
// cleanly (the sqlite3 shell, Python, a backup tool) believes itself the
// last, checkpoints, and deletes the -wal and -shm under it; what it
// commits afterwards goes to an unlinked -wal that no other process reads
// and that a SIGKILL loses (docs/design.md §15.1,
// TestASecondOpenKeepsTheProcessLocks).
//
// examine reads a file's header with a descriptor of its own, before any
// driver opens it. So it does that only for a file no pool of this
// process holds open: held counts, per file, the pools OpenAccess and
// OpenRelaxed opened and have not closed. The count is taken under held's lock, with the header read, and
// before the pool's first connection, so no pool of this process takes a
// lock on a file while its header is read.
var held = struct {
	sync.Mutex
	files map[string]int
}{files: map[string]int{}}

// heldKey is the key of path in held: its absolute form, in its
// directory's real path (so that two opens through different paths to
// one directory, a symlink's or a relative one, meet; the directory
// exists before the file does, so the key is the same once the first
// open has created it).
func heldKey(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}

// hold counts a pool on the file t names until release is called; for
// an in-memory database it counts nothing.
func hold(t Target) (release func()) {
	if t.Path == "" {
		return func() {}
	}
	key := heldKey(t.Path)
	held.Lock()
	held.files[key]++
	held.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			held.Lock()
			defer held.Unlock()
			if held.files[key]--; held.files[key] == 0 {
				delete(held.files, key)
			}
		})
	}
}

// heldConnector is a pool's connector that releases its hold on the file
// when the pool is closed (sql.DB.Close closes a connector that is an
// io.Closer).
type heldConnector struct {
	driver.Connector
	release func()
}

func (c *heldConnector) Close() error {
	c.release()
	return nil
}

// openHeld opens a pool on dsn that holds the file t names until it is
// closed.
func openHeld(t Target, dsn string) (*sql.DB, error) {
	base, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(&heldConnector{Connector: base, release: hold(t)}), nil
}
