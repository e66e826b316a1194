package sqlitedb

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// IsBusy reports whether err is SQLITE_BUSY (under any extended code):
// another connection held the write lock past busy_timeout.
func IsBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// StorageFull reports whether err is SQLITE_FULL or SQLITE_IOERR (primary
// result codes, under any extended code): the disk is full or failing.
func StorageFull(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR:
		return true
	}
	return false
}

// busyTimeoutMS is the busy_timeout, in milliseconds, of a writer pool's
// connections: how long SQLite's busy handler polls for a lock another
// connection holds before the statement fails with SQLITE_BUSY. Tests
// shorten it.
var busyTimeoutMS = 10000

// busyPatience is how long opening keeps retrying its schema work while
// another process writes: a busy writer process hands the write lock from
// one of its transactions to the next, and SQLite's busy handler, which
// polls, may miss every gap for longer than busy_timeout.
var busyPatience = 2 * time.Minute

// RetryBusy runs fn again while it fails with SQLITE_BUSY, for up to two
// minutes or until ctx ends: for the one-off work of opening a database
// (migrations, DDL), which may wait; not for batches.
func RetryBusy(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(busyPatience)
	for {
		err := fn()
		if !IsBusy(err) || time.Now().After(deadline) {
			return err
		}
		contended()
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

// onContention, when set (tests), is called each time a step meets its
// database busy and goes on: it waits for the writer turn or tries again.
var onContention func()

// busyRetries counts the statements run again after SQLITE_BUSY or
// SQLITE_LOCKED.
var busyRetries atomic.Int64

// BusyRetries is how many times, in this process, a statement or BEGIN on
// a seqbox SQLite pool failed with SQLITE_BUSY or SQLITE_LOCKED and was
// run again inside its step.
func BusyRetries() int64 { return busyRetries.Load() }
