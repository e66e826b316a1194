package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/ddl"
	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/stretchr/testify/require"
)

// Opening work waits out another connection's write lock held past
// busy_timeout (here 20 ms): Ensure fails with SQLITE_BUSY and RetryBusy
// runs it again until the lock is free.
func TestRetryBusyWaitsOutABusyDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(20)&_txlock=immediate"
	holder, err := sql.Open("sqlite", dsn)
	require.NoError(t, err)
	defer holder.Close()
	opener, err := sql.Open("sqlite", dsn)
	require.NoError(t, err)
	defer opener.Close()
	_, err = holder.Exec(`CREATE TABLE held (x INTEGER)`)
	require.NoError(t, err)

	tx, err := holder.Begin() // BEGIN IMMEDIATE: the write lock
	require.NoError(t, err)
	_, err = tx.Exec(`INSERT INTO held VALUES (1)`)
	require.NoError(t, err)
	released := make(chan struct{})
	go func() {
		time.Sleep(300 * time.Millisecond)
		tx.Commit()
		close(released)
	}()

	_, err = opener.Exec(`CREATE TABLE IF NOT EXISTS direct (x INTEGER)`)
	require.True(t, IsBusy(err), "without retrying, the write lock wins: %v", err)

	start := time.Now()
	require.NoError(t, RetryBusy(ctx, func() error {
		return ddl.Ensure(ctx, opener, dialect.SQLite, `CREATE TABLE IF NOT EXISTS waited (x INTEGER)`)
	}))
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "it waited for the holder")
	<-released
	var n int
	require.NoError(t, opener.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'waited'`).Scan(&n))
	require.Equal(t, 1, n)

}

// A database that may grow no further fails with SQLITE_FULL, which
// StorageFull names; other errors are not a full disk.
func TestStorageFull(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "full.db"))
	require.NoError(t, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	_, err = db.Exec(`CREATE TABLE big (b BLOB)`)
	require.NoError(t, err)
	var pages int
	require.NoError(t, db.QueryRow(`PRAGMA page_count`).Scan(&pages))
	_, err = db.Exec(`PRAGMA max_page_count = ` + strconv.Itoa(pages+1))
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO big VALUES (zeroblob(1000000))`)
	require.Error(t, err)
	require.True(t, StorageFull(err), "%v", err)

	_, err = db.Exec(`SELECT * FROM no_such_table`)
	require.Error(t, err)
	require.False(t, StorageFull(err), "%v", err)
	require.False(t, StorageFull(errors.New("plain")))
}
