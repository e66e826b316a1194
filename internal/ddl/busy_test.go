package ddl_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/ddl"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

// Opening work waits out another connection's write lock held past
// busy_timeout (here 20 ms): Ensure fails with SQLITE_BUSY and runs again
// until the lock is free.
func TestEnsureWaitsOutABusyDatabase(t *testing.T) {
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
	require.True(t, ddl.IsBusy(err), "without retrying, the write lock wins: %v", err)

	start := time.Now()
	require.NoError(t, ddl.Ensure(ctx, opener, `CREATE TABLE IF NOT EXISTS waited (x INTEGER)`))
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "it waited for the holder")
	<-released
	var n int
	require.NoError(t, opener.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'waited'`).Scan(&n))
	require.Equal(t, 1, n)

}
