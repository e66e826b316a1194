package seqbox_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
)

// queuedSetup opens a PostgreSQL store with a table qt for the handlers
// below.
func queuedSetup(t *testing.T) (store.Store, seqbox.Config) {
	t.Helper()
	st, cfg, _ := queuedSetupURL(t)
	return st, cfg
}

// queuedSetupURL is queuedSetup, with the database's URL.
func queuedSetupURL(t *testing.T) (store.Store, seqbox.Config, string) {
	t.Helper()
	ctx := context.Background()
	u := pgtest.URL(t)
	st, err := postgres.Open(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	_, err = st.DB().ExecContext(ctx, `CREATE TABLE qt (id TEXT PRIMARY KEY, n INT NOT NULL DEFAULT 0, b BYTEA, at TIMESTAMPTZ)`)
	require.NoError(t, err)
	return st, seqbox.Config{Name: "queued", Store: st,
		Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}}}, u
}

func queuedBatch(ids ...string) [][]byte {
	var raws [][]byte
	for _, id := range ids {
		raws = append(raws, fmt.Appendf(nil, `{"id":%q,"source":"erp","type":"t","partitionkey":%q,"objectversion":1}`, id, id))
	}
	return raws
}

func outcomeByID(out [][]seqboxtype.Result) map[string]seqboxtype.Outcome {
	got := map[string]seqboxtype.Outcome{}
	for _, results := range out {
		for _, res := range results {
			got[res.ID] = res.Outcome
		}
	}
	return got
}

// On PostgreSQL a batch's handlers write through a Tx that sends their
// statements together. For the handler it behaves as the transaction
// would: a read sees the writes before it, RowsAffected is the statement's,
// and the arguments are what they were at the call even if the handler
// reuses its buffers afterwards.
func TestHandlerWritesAreSentTogetherOnPostgres(t *testing.T) {
	st, cfg := queuedSetup(t)
	var mu sync.Mutex
	kinds := map[string]string{}
	cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		mu.Lock()
		kinds[ev.ID] = fmt.Sprintf("%T", tx)
		mu.Unlock()
		buf := []byte(ev.ID)
		at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
		if _, err := tx.ExecContext(ctx, `INSERT INTO qt (id, b, at) VALUES ($1, $2, $3)`, ev.ID, buf, &at); err != nil {
			return err
		}
		buf[0], at = 'X', at.Add(time.Hour) // reused after the call
		res, err := tx.ExecContext(ctx, `UPDATE qt SET n = n + 1 WHERE id = $1 OR id = 'none'`, ev.ID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("rows affected %d, %v", n, err)
		}
		if _, err := res.LastInsertId(); err == nil {
			return errors.New("LastInsertId answered on PostgreSQL")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE qt SET n = n + 10 WHERE id = $1`, ev.ID); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT n FROM qt WHERE id = $1`, ev.ID).Scan(&n); err != nil {
			return err
		}
		if n != 11 {
			return fmt.Errorf("read %d after its own writes, want 11", n)
		}
		_, err = tx.ExecContext(ctx, `UPDATE qt SET n = n + 100 WHERE id = $1`, ev.ID) // sent at the end
		return err
	}
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(t, err)
	out, err := c.DeliverBatch(context.Background(), queuedBatch("a1", "a2", "a3"))
	require.NoError(t, err)
	require.Equal(t, map[string]seqboxtype.Outcome{"a1": seqboxtype.Applied, "a2": seqboxtype.Applied, "a3": seqboxtype.Applied}, outcomeByID(out))
	for id, kind := range kinds {
		require.NotEqual(t, "*sql.Tx", kind, "%s: the handler's writes went one by one", id)
	}
	rows, err := st.DB().Query(`SELECT id, n, b, at FROM qt ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id string
		var n int
		var b []byte
		var at time.Time
		require.NoError(t, rows.Scan(&id, &n, &b, &at))
		got = append(got, fmt.Sprintf("%s n=%d b=%s at=%s", id, n, b, at.UTC().Format(time.TimeOnly)))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"a1 n=111 b=a1 at=00:00:00", "a2 n=111 b=a2 at=00:00:00", "a3 n=111 b=a3 at=00:00:00"}, got)
}

// A statement that fails after the handler that sent it returned (a
// unique violation here) fails nobody yet: the batch runs again with
// savepoints, each handler's statements run one by one, and the failing
// handler meets its error there, as its own. Its batch mates apply once.
func TestQueuedStatementFailureRerunsTheBatch(t *testing.T) {
	st, cfg := queuedSetup(t)
	_, err := st.DB().Exec(`INSERT INTO qt (id) VALUES ('taken')`)
	require.NoError(t, err)
	var mu sync.Mutex
	calls := map[string][]string{}
	cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		id := ev.ID
		if id == "b2" {
			id = "taken"
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO qt (id) VALUES ($1)`, id)
		_, direct := tx.(*sql.Tx)
		mu.Lock()
		calls[ev.ID] = append(calls[ev.ID], fmt.Sprintf("direct=%v err=%v", direct, err != nil))
		mu.Unlock()
		if err != nil {
			return seqbox.Permanent(err)
		}
		return nil
	}
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(t, err)
	out, err := c.DeliverBatch(context.Background(), queuedBatch("b1", "b2", "b3"))
	require.NoError(t, err)
	require.Equal(t, map[string]seqboxtype.Outcome{"b1": seqboxtype.Applied, "b2": seqboxtype.DeadLettered, "b3": seqboxtype.Applied}, outcomeByID(out))
	require.Equal(t, map[string][]string{
		"b1": {"direct=false err=false", "direct=true err=false"},
		"b2": {"direct=false err=false", "direct=true err=true"},
		"b3": {"direct=false err=false", "direct=true err=false"},
	}, calls)
	var ids []string
	rows, err := st.DB().Query(`SELECT id FROM qt ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"b1", "b3", "taken"}, ids)
}

// seqbox's own writes that a batch never reads back (a duplicate's count
// on its inbox row, an audit row) go with the handlers' writes on
// PostgreSQL, and land as they would one by one: a re-send within the
// batch and one in a later batch are both counted, and a stale version is
// audited.
func TestAuditWritesGoWithTheHandlersWrites(t *testing.T) {
	st, cfg := queuedSetup(t)
	cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO qt (id) VALUES ($1)`, ev.ID)
		return err
	}
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(t, err)
	msg := func(id, key string, v int) []byte {
		return fmt.Appendf(nil, `{"id":%q,"source":"erp","type":"t","partitionkey":%q,"objectversion":%d}`, id, key, v)
	}
	out, err := c.DeliverBatch(context.Background(), [][]byte{msg("a1", "a", 1), msg("a1", "a", 1), msg("b2", "b", 2), msg("b1", "b", 1)})
	require.NoError(t, err)
	require.Equal(t, []seqboxtype.Outcome{seqboxtype.Applied, seqboxtype.Duplicate, seqboxtype.Applied, seqboxtype.Stale},
		[]seqboxtype.Outcome{out[0][0].Outcome, out[1][0].Outcome, out[2][0].Outcome, out[3][0].Outcome})
	out, err = c.DeliverBatch(context.Background(), [][]byte{msg("a1", "a", 1)})
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Duplicate, out[0][0].Outcome)

	var dups int
	require.NoError(t, st.DB().QueryRow(`SELECT duplicates FROM seqbox_inbox WHERE consumer = $1 AND id = 'a1'`, cfg.Name).Scan(&dups))
	require.Equal(t, 2, dups)
	var audited int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_audit WHERE consumer = $1 AND id = 'b1' AND outcome = $2`,
		cfg.Name, seqboxtype.Stale).Scan(&audited))
	require.Equal(t, 1, audited)
}

// Later copies of an identity within one batch are answered from the row
// the batch inserted, on both stores, as a read would answer them: the
// same payload is a duplicate of the applied row (counted once per copy),
// another payload a collision.
func TestCopiesWithinABatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (store.Store, seqbox.Config)
	}{
		{"sqlite", func(t *testing.T) (store.Store, seqbox.Config) { b := setup(t); return b.store, b.cfg }},
		{"postgres", func(t *testing.T) (store.Store, seqbox.Config) {
			st, cfg := queuedSetup(t)
			cfg.Handler = func(context.Context, seqbox.Tx, seqboxtype.Event) error { return nil }
			return st, cfg
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, cfg := tc.open(t)
			c, err := seqbox.NewConsumer(cfg)
			require.NoError(t, err)
			msg := func(data string) []byte {
				return fmt.Appendf(nil, `{"id":"x","source":"erp","type":"t","partitionkey":"k","objectversion":1,"data":%q}`, data)
			}
			out, err := c.DeliverBatch(context.Background(), [][]byte{msg("a"), msg("a"), msg("b"), msg("a")})
			require.NoError(t, err)
			var got []string
			for _, results := range out {
				got = append(got, string(results[0].Outcome)+": "+results[0].Reason)
			}
			require.Len(t, got, 4)
			require.Equal(t, []string{"applied: ", "duplicate: identity already recorded (applied)"}, got[:2])
			require.Regexp(t, `^collision: identity already recorded with payload hash [0-9a-f]{12}, this one has [0-9a-f]{12}$`, got[2])
			require.Equal(t, "duplicate: identity already recorded (applied)", got[3])
			var dups int
			require.NoError(t, st.DB().QueryRow(`SELECT duplicates FROM seqbox_inbox WHERE consumer = $1 AND id = 'x'`, cfg.Name).Scan(&dups))
			require.Equal(t, 2, dups)
			counts, err := st.Executor().Counts(context.Background(), cfg.Name)
			require.NoError(t, err)
			require.Equal(t, int64(1), counts.InboxRows)
			require.Equal(t, int64(1), counts.Parked, "the collision is parked")
		})
	}
}

// A statement without arguments runs at once, after what is queued: it
// may be several statements in one text, which a pipeline cannot send.
// The batch then needs no second run.
func TestStatementsWithoutArgumentsRunAtOnce(t *testing.T) {
	st, cfg := queuedSetup(t)
	var mu sync.Mutex
	calls := 0
	cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		mu.Lock()
		calls++
		mu.Unlock()
		if _, err := tx.ExecContext(ctx, `INSERT INTO qt (id) VALUES ($1)`, ev.ID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE qt SET n = n + 1; UPDATE qt SET n = n + 10`)
		return err
	}
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(t, err)
	out, err := c.DeliverBatch(context.Background(), queuedBatch("c1", "c2"))
	require.NoError(t, err)
	require.Equal(t, map[string]seqboxtype.Outcome{"c1": seqboxtype.Applied, "c2": seqboxtype.Applied}, outcomeByID(out))
	require.Equal(t, 2, calls, "each handler ran once: the batch had no second run")
	var n1, n2 int
	require.NoError(t, st.DB().QueryRow(`SELECT (SELECT n FROM qt WHERE id = 'c1'), (SELECT n FROM qt WHERE id = 'c2')`).Scan(&n1, &n2))
	require.Equal(t, []int{22, 11}, []int{n1, n2})
}

// A Handler that asserts its tx is a *sql.Tx (to hand it to code that
// wants one) meets the queue once: that batch runs again with the
// *sql.Tx, nothing is dead-lettered, a warning says so, and the
// consumer's later batches give it the *sql.Tx from the start.
func TestHandlerThatNeedsTheSQLTx(t *testing.T) {
	st, cfg := queuedSetup(t)
	var logs bytes.Buffer // DeliverBatch logs from this goroutine
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	var mu sync.Mutex
	calls := map[string]int{}
	cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		mu.Lock()
		calls[ev.ID]++
		mu.Unlock()
		stx := tx.(*sql.Tx)
		_, err := stx.ExecContext(ctx, `INSERT INTO qt (id) VALUES ($1)`, ev.ID)
		return err
	}
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(t, err)
	out, err := c.DeliverBatch(context.Background(), queuedBatch("d1", "d2"))
	require.NoError(t, err)
	require.Equal(t, map[string]seqboxtype.Outcome{"d1": seqboxtype.Applied, "d2": seqboxtype.Applied}, outcomeByID(out))
	require.Equal(t, map[string]int{"d1": 2, "d2": 1}, calls, "d1 met the queue; the batch ran again with the *sql.Tx")
	require.Contains(t, logs.String(), "the handler needs its tx to be a *sql.Tx")

	out, err = c.DeliverBatch(context.Background(), queuedBatch("d3"))
	require.NoError(t, err)
	require.Equal(t, map[string]seqboxtype.Outcome{"d3": seqboxtype.Applied}, outcomeByID(out))
	require.Equal(t, 1, calls["d3"], "later batches give the *sql.Tx from the start")
	var n int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM qt`).Scan(&n))
	require.Equal(t, 3, n)
}

// Over the embedded queue in the same PostgreSQL database, the
// acknowledgement goes in the batch's transaction with the queued writes.
// A queued statement that fails (a unique violation) takes the batch to
// its second run: the failing message alone is dead-lettered, the others
// apply once, and every delivery is acknowledged.
func TestQueuedWritesAndTheAckOverTheEmbeddedQueue(t *testing.T) {
	st, cfg, u := queuedSetupURL(t)
	_, err := st.DB().Exec(`INSERT INTO qt (id) VALUES ('task-3')`)
	require.NoError(t, err)
	q := openQueue(t, u, time.Minute)
	cfg.Transport, cfg.BatchSize = q, 16
	cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO qt (id) VALUES ($1)`, ev.ID); err != nil {
			return seqbox.Permanent(err)
		}
		return nil
	}
	ids := taskIDs("task", 8)
	publishTasks(t, q, ids...)
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(t, err)
	require.NoError(t, runUntil(t, c, func() bool { return unacked(t, q) == 0 }))
	counts, err := st.Executor().Counts(context.Background(), cfg.Name)
	require.NoError(t, err)
	require.Equal(t, int64(7), counts.Applied)
	require.Equal(t, int64(1), counts.DeadLetters)
	var n int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM qt`).Scan(&n))
	require.Equal(t, 8, n, "seven effects and the row that was there")
}

// A handler that needs a *sql.Tx (a library taking one) asks SQLTx for
// it: the writes it queued so far are sent first, so its statements and
// the queued ones run in the order the handler made them, every handler
// runs once, and the consumer goes on queuing.
func TestSQLTxGivesTheHandlersTransaction(t *testing.T) {
	st, cfg := queuedSetup(t)
	var mu sync.Mutex
	calls := map[string]int{}
	cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		mu.Lock()
		calls[ev.ID]++
		mu.Unlock()
		if _, err := tx.ExecContext(ctx, `INSERT INTO qt (id) VALUES ($1)`, ev.ID+"-queued"); err != nil {
			return err
		}
		stx, err := seqbox.SQLTx(tx)
		if err != nil {
			return err
		}
		// The queued row is there before this statement runs.
		var n int
		if err := stx.QueryRowContext(ctx, `SELECT COUNT(*) FROM qt WHERE id = $1`, ev.ID+"-queued").Scan(&n); err != nil || n != 1 {
			return fmt.Errorf("the queued write was not sent first: %d rows, %v", n, err)
		}
		_, err = stx.ExecContext(ctx, `INSERT INTO qt (id) VALUES ($1)`, ev.ID+"-direct")
		return err
	}
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(t, err)
	out, err := c.DeliverBatch(context.Background(), queuedBatch("s1", "s2"))
	require.NoError(t, err)
	require.Equal(t, map[string]seqboxtype.Outcome{"s1": seqboxtype.Applied, "s2": seqboxtype.Applied}, outcomeByID(out))
	require.Equal(t, map[string]int{"s1": 1, "s2": 1}, calls, "no run again: the handler asked instead of asserting")
	var n int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM qt`).Scan(&n))
	require.Equal(t, 4, n)

	_, err = seqbox.SQLTx(struct{ seqbox.Tx }{})
	require.ErrorContains(t, err, "not a Handler's Tx")
}
