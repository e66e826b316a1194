package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport/embedded"
	"github.com/stretchr/testify/require"
	msqlite "modernc.org/sqlite"
)

// TestAgentPathContentionIsNotBusy runs, on one SQLite file, what serve's
// agent path does at once (issue 36): batch transactions back to back (the
// pipeline), the embedded queue's receives and acks, and many goroutines
// writing outside any transaction through the store's Executor (the
// effects ledger's pending and finished rows, the decider's claims and
// decisions). Every step is this process's own: none of them may fail
// with SQLITE_BUSY or SQLITE_LOCKED, however long the others keep the
// file busy. It also guards the writer turn those writes take
// (internal/sqlitedb, patient.go): a turn not given back (the rows of an
// INSERT … RETURNING, a receive that holds it already) would hang it.
// Within one process this load did not meet SQLITE_BUSY before issue 36's
// fix either; the lock held past busy_timeout by another process is
// reproduced in internal/sqlitedb's tests.
//
// SEQBOX_BUSY_OPS sets the writes per executor goroutine (default 20);
// the counts are logged, for the before/after figures of the issue.
func TestAgentPathContentionIsNotBusy(t *testing.T) {
	ops := 20
	if v, err := strconv.Atoi(os.Getenv("SEQBOX_BUSY_OPS")); err == nil && v > 0 {
		ops = v
	}
	const writers = 16
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "seqbox.db")
	st, err := sqlite.Open(ctx, path)
	require.NoError(t, err)
	defer st.Close()
	q, err := embedded.Open(ctx, path, embedded.Config{Wait: time.Millisecond, PollInterval: time.Millisecond})
	require.NoError(t, err)
	defer q.Close()

	var (
		busy, other, done atomic.Int64
		firstMu           sync.Mutex
		first             error
	)
	note := func(step string, err error) {
		if err == nil {
			return
		}
		if busyOrLocked(err) {
			busy.Add(1)
		} else {
			other.Add(1)
		}
		firstMu.Lock()
		if first == nil {
			first = fmt.Errorf("%s: %w", step, err)
		}
		firstMu.Unlock()
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	// The pipeline: one batch transaction after another, in the writer turn.
	bg.Add(1)
	go func() {
		defer bg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tx, err := st.Begin(ctx)
			if err != nil {
				note("pipeline begin", err)
				continue
			}
			for k := range 100 {
				if err := tx.KeyEnsure(ctx, store.KeyEnsureParams{Consumer: "c", Key: fmt.Sprintf("k%d-%d", i, k), At: time.Now()}); err != nil {
					note("pipeline write", err)
					break
				}
			}
			note("pipeline commit", tx.Commit())
		}
	}()
	// The embedded queue: publish, receive, ack.
	bg.Add(1)
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			note("publish", q.PublishBatch(ctx, [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d")}))
			ds, err := q.Receive(ctx, 4)
			note("receive", err)
			if len(ds) > 0 {
				note("ack", q.AckBatch(ctx, ds))
			}
		}
	}()
	// The agent path's writes outside transactions: ledger and decider.
	ex := st.Executor()
	var writing sync.WaitGroup
	for w := range writers {
		writing.Add(1)
		go func() {
			defer writing.Done()
			for i := range ops {
				id := fmt.Sprintf("e%d-%d", w, i)
				key := "sbx-" + id
				now := time.Now()
				_, err := ex.EffectInsertPending(ctx, store.EffectInsertPendingParams{Consumer: "c", Source: "s", ID: id,
					Action: "call", IdempotencyKey: key, At: now, LeaseUntil: now.Add(time.Minute)})
				note("ledger pending", err)
				note("ledger record", ex.EffectRecord(ctx, store.EffectRecordParams{IdempotencyKey: key,
					From: []seqboxtype.Effect{seqboxtype.EffectPending}, To: seqboxtype.EffectSucceeded, Ref: "r", At: now}))
				_, err = ex.DecisionClaim(ctx, store.DecisionClaimParams{Consumer: "c", Source: "s", ID: id, Owner: "o",
					Now: now, Until: now.Add(time.Minute)})
				note("decision claim", err)
				_, err = ex.DecisionRecord(ctx, store.DecisionRecordParams{Consumer: "c", Source: "s", ID: id, Decision: []byte("{}"), At: now})
				note("decision record", err)
				done.Add(1)
			}
		}()
	}
	writing.Wait()
	close(stop)
	bg.Wait()
	t.Logf("executor rounds %d (4 writes each), busy or locked errors %d, other errors %d", done.Load(), busy.Load(), other.Load())
	require.NoError(t, first, "busy or locked errors: %d", busy.Load())
}

// busyOrLocked reports whether err is SQLITE_BUSY or SQLITE_LOCKED, under
// any extended code.
func busyOrLocked(err error) bool {
	var se *msqlite.Error
	return errors.As(err, &se) && (se.Code()&0xff == 5 || se.Code()&0xff == 6)
}
