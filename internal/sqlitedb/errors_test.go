package sqlitedb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/ddl"
	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"
)

// Opening work waits out another connection's write lock held past
// busy_timeout (here 20 ms): Ensure fails with SQLITE_BUSY and RetryBusy
// runs it again until the lock is free. The holder keeps the lock until
// Ensure has been refused twice (it ran again after a refusal), so what is
// checked is the sequence of attempts, not how long any of them took.
func TestRetryBusyWaitsOutABusyDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(20)&_txlock=immediate"
	holder, err := sql.Open("sqlite", dsn)
	require.NoError(t, err)
	defer holder.Close()
	base, err := sqlite.NewConnector(dsn)
	require.NoError(t, err)
	w := &beginWatch{Connector: base}
	opener := sql.OpenDB(w)
	defer opener.Close()
	_, err = holder.Exec(`CREATE TABLE held (x INTEGER)`)
	require.NoError(t, err)

	tx, err := holder.Begin() // BEGIN IMMEDIATE: the write lock
	require.NoError(t, err)
	_, err = tx.Exec(`INSERT INTO held VALUES (1)`)
	require.NoError(t, err)

	_, err = opener.Exec(`CREATE TABLE IF NOT EXISTS direct (x INTEGER)`)
	require.True(t, IsBusy(err), "without retrying, the write lock wins: %v", err)

	ensured := make(chan error, 1)
	go func() {
		ensured <- RetryBusy(ctx, func() error {
			return ddl.Ensure(ctx, opener, dialect.SQLite, `CREATE TABLE IF NOT EXISTS waited (x INTEGER)`)
		})
	}()
	refusedTwice := waitfor.Until(time.Minute, func() bool { return w.busy.Load() >= 2 })
	select {
	case err := <-ensured:
		t.Fatalf("Ensure returned while the write lock was held: %v", err)
	default:
	}
	require.NoError(t, tx.Commit())
	require.True(t, refusedTwice, "Ensure's transaction was refused %d times while the lock was held, want it to run again after a refusal", w.busy.Load())
	require.NoError(t, <-ensured)
	require.Greater(t, w.begins.Load(), w.busy.Load(), "a transaction began once the lock was free")
	var n int
	require.NoError(t, opener.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'waited'`).Scan(&n))
	require.Equal(t, 1, n)
}

// beginWatch counts its connections' BeginTx calls and those refused with
// SQLITE_BUSY (with _txlock=immediate, BEGIN takes the write lock).
type beginWatch struct {
	driver.Connector
	begins, busy atomic.Int64
}

func (w *beginWatch) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := w.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, w: w}, nil
}

// watchedConn passes through what database/sql uses here, counting
// BeginTx.
type watchedConn struct {
	driver.Conn
	w *beginWatch
}

func (c *watchedConn) Unwrap() driver.Conn { return c.Conn }

func (c *watchedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.w.begins.Add(1)
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if IsBusy(err) {
		c.w.busy.Add(1)
	}
	return tx, err
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
