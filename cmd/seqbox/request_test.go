package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport/embedded"
	"github.com/stretchr/testify/require"
)

// The design defect the hostile review found: `seqbox dlq redrive` against
// an application's database used to apply the message through the
// built-in record handler. Now the CLI records a request, and the running
// library consumer that owns the handler executes it: the application's
// table gets the effect and no record_* table appears.
func TestRedriveRunsInTheOwningConsumerSQLite(t *testing.T) {
	t.Parallel()
	testRedriveRunsInTheOwningConsumer(t, filepath.Join(t.TempDir(), "app.db"))
}

func TestRedriveRunsInTheOwningConsumerPostgres(t *testing.T) {
	t.Parallel()
	testRedriveRunsInTheOwningConsumer(t, pgtest.URL(t))
}

func openApp(t *testing.T, db string) store.Store {
	t.Helper()
	ctx := context.Background()
	var st store.Store
	var err error
	if strings.HasPrefix(db, "postgres") {
		st, err = postgres.Open(ctx, db)
	} else {
		st, err = sqlite.Open(ctx, db)
	}
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

func testRedriveRunsInTheOwningConsumer(t *testing.T, db string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := openApp(t, db)
	_, err := st.DB().ExecContext(ctx, `CREATE TABLE crm_tasks (id TEXT PRIMARY KEY, opportunity TEXT NOT NULL)`)
	require.NoError(t, err)
	q, err := embedded.Open(ctx, db, embedded.Config{Lease: 30 * time.Second})
	require.NoError(t, err)
	defer q.Close()

	var crmDown atomic.Bool
	crmDown.Store(true)
	c, err := seqbox.NewConsumer(seqbox.Config{
		Name: "crm-followup", Store: st, Transport: q, Workers: 1, BatchSize: 8,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			if crmDown.Load() {
				return seqbox.Permanent(errors.New("crm rejects the task"))
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO crm_tasks (id, opportunity) VALUES ($1, $2)`, ev.ID, ev.PartitionKey)
			return err
		},
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	require.NoError(t, q.Publish(ctx, []byte(`{"specversion":"1.0","id":"evt-1","source":"crm","type":"followup.requested","partitionkey":"opp-1","objectversion":1}`)))
	require.NoError(t, q.Publish(ctx, []byte(`{"specversion":"1.0","id":"evt-2","source":"crm","type":"followup.requested","partitionkey":"opp-1","objectversion":2}`)))
	var seq int64
	require.Eventually(t, func() bool {
		letters, err := st.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: "crm-followup", All: false})
		require.NoError(t, err)
		if len(letters) == 0 {
			return false
		}
		seq = letters[0].Seq
		v, err := st.Executor().KeyViewGet(ctx, store.KeyRef{Consumer: "crm-followup", Key: "opp-1"})
		return err == nil && v.BlockedCount == 1
	}, 20*time.Second, 50*time.Millisecond, "evt-1 dead-letters and evt-2 parks behind it")

	// The read-only commands see it without any policy flag.
	require.Contains(t, ok(t, "dlq", "list", "--db", db), "evt-1")
	keys := ok(t, "keys", "list", "--db", db, "--consumer", "crm-followup")
	require.Contains(t, keys, "seqbox dlq redrive "+strconv.FormatInt(seq, 10)+" --db ")

	crmDown.Store(false)
	out := ok(t, "dlq", "redrive", "--output", "jsonl", strconv.FormatInt(seq, 10), "--db", db, "--consumer", "crm-followup",
		"--by", "alice", "--reason", "crm fixed")
	require.Equal(t, lines(
		`{"source":"crm","id":"evt-1","partitionkey":"opp-1","objectversion":1,"outcome":"applied","reason":""}`,
		`{"source":"crm","id":"evt-2","partitionkey":"opp-1","objectversion":2,"outcome":"applied","reason":""}`,
	), out)

	var tasks int
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM crm_tasks`).Scan(&tasks))
	require.Equal(t, 2, tasks, "the application's own handler applied both")
	require.Zero(t, recordTables(t, st, db), "no record_* table was created in the application's database")

	cancel()
	require.NoError(t, <-done)
}

// recordTables counts tables named record_* anywhere in the database.
func recordTables(t *testing.T, st store.Store, db string) int {
	t.Helper()
	q := `SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'record%'`
	if strings.HasPrefix(db, "postgres") {
		q = `SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE 'record%'
			AND table_schema = ANY (current_schemas(false))`
	}
	var n int
	require.NoError(t, st.DB().QueryRow(q).Scan(&n))
	return n
}

// Without a live owner, the CLI waits --wait, withdraws the request and
// says so; nothing is applied later by surprise.
func TestRedriveWithoutLiveConsumer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "app.db")
	st := openApp(t, db)
	c, err := seqbox.NewConsumer(seqbox.Config{Name: "billing", Store: st,
		Handler: func(context.Context, seqbox.Tx, seqboxtype.Event) error { return seqbox.Permanent(errors.New("no")) }})
	require.NoError(t, err)
	results, err := c.Deliver(ctx, []byte(`{"id":"b-1","source":"erp","type":"invoice"}`), 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.DeadLettered, results[0].Outcome)

	line := fails(t, "dlq", "redrive", "--output", "jsonl", "1", "--db", db, "--wait", "300ms")
	require.Contains(t, line, `no live consumer "billing" took request 1 within 300ms`)
	require.Contains(t, line, "no Run of it has a heartbeat")
	require.Contains(t, line, "a consumer driven by Deliver takes requests only when it calls Maintain or RunRequests",
		"billing delivered and was never Run: the message says how such a consumer takes requests (it said \"it has never run\")")
	require.Contains(t, line, "cancelled")
	r, err := st.Executor().RequestGet(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.RequestCancelled, r.State)
	n, err := c.RunRequests(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a withdrawn request never runs")

	// The consumer that is asked for must exist; the error lists those that do.
	require.Contains(t, fails(t, "dlq", "list", "--db", db, "--consumer", "biling"),
		`--consumer "biling": no such consumer in `+db+`; it has "billing"`)
}
