package seqbox_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/seqbox/seqbox/transport/embedded"
	"github.com/stretchr/testify/require"
)

// countingLog counts the records whose message starts with each prefix
// and signals every record.
type countingLog struct {
	prefixes []string
	counts   []atomic.Int64
	any      chan struct{}
}

func newCountingLog(prefixes ...string) *countingLog {
	return &countingLog{prefixes: prefixes, counts: make([]atomic.Int64, len(prefixes)), any: make(chan struct{}, 1)}
}

func (l *countingLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *countingLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *countingLog) WithGroup(string) slog.Handler            { return l }
func (l *countingLog) Handle(_ context.Context, r slog.Record) error {
	for i, p := range l.prefixes {
		if strings.HasPrefix(r.Message, p) {
			l.counts[i].Add(1)
		}
	}
	select {
	case l.any <- struct{}{}:
	default:
	}
	return nil
}

// While the database is unreachable, the consumer stops receiving and
// waits for it: the messages it holds are not received again and again,
// each delivery spending an attempt, until the crash-loop bound
// dead-letters a message whose handler never ran. Before, a PostgreSQL
// outage of a few seconds (a failover, a restart) did exactly that, at
// one redelivery a second. The queue stays reachable here (its own
// connection), the store goes through a proxy that is cut.
func TestStoreOutageSpendsNoAttempts(t *testing.T) {
	t.Parallel()
	direct := pgtest.URL(t)
	proxy, through := pgtest.Proxy(t, direct)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := postgres.Open(ctx, through)
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, replay.EnsureRecordTables(ctx, st.DB()))
	q, err := embedded.Open(ctx, direct, embedded.Config{})
	require.NoError(t, err)
	defer q.Close()
	require.NoError(t, q.Publish(ctx, []byte(`{"specversion":"1.0","id":"o1","source":"crm","type":"t","partitionkey":"K","objectversion":1}`)))

	log := newCountingLog("seqbox: batch failed", "seqbox: the store is unreachable")
	applied := make(chan seqboxtype.Result, 1)
	c, err := seqbox.NewConsumer(seqbox.Config{Name: "outage", Store: st, Transport: q, Handler: replay.RecordHandler("outage"),
		Logger: slog.New(log), Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 1}},
		Observer: func(r seqboxtype.Result) { applied <- r }})
	require.NoError(t, err)

	proxy.Cut()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	// Six failed batches (before: one a second, each a delivery) or six
	// failed looks at the store (now: no delivery between them).
	for log.counts[0].Load() < 6 && log.counts[1].Load() < 6 {
		<-log.any
	}
	var attempts int
	peek, err := postgres.Open(ctx, direct)
	require.NoError(t, err)
	defer peek.Close()
	require.NoError(t, peek.DB().QueryRowContext(ctx, `SELECT attempts FROM seqbox_queue`).Scan(&attempts))
	require.LessOrEqual(t, attempts, 2, "the outage spent the message's deliveries (batch failures: %d)", log.counts[0].Load())

	proxy.Restore()
	r := <-applied
	require.Equal(t, seqboxtype.Applied, r.Outcome, r.Reason)
	cancel()
	require.NoError(t, <-done)
}

// A store closed under a running consumer never answers again: Run ends
// with an error that says so, and the message it held is not spent. The
// message waits in the queue for the next consumer. Before, Run nacked and
// received it again once a second, and returned nil when its context
// ended; the message had been dead-lettered as a crash loop by then.
func TestRunEndsWhenItsStoreIsClosed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q, err := embedded.Open(ctx, b.path, embedded.Config{})
	require.NoError(t, err)
	defer q.Close()
	require.NoError(t, q.Publish(ctx, []byte(`{"specversion":"1.0","id":"c1","source":"crm","type":"t"}`)))
	b.cfg.Transport = q
	b.cfg.Policies.Retry.MaxAttempts = 1
	c := b.consumer(t)
	require.NoError(t, b.store.Close())
	err = c.Run(ctx)
	require.ErrorContains(t, err, "its store is closed")

	st, err := sqlite.Open(ctx, b.path)
	require.NoError(t, err)
	defer st.Close()
	var attempts int
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT attempts FROM seqbox_queue`).Scan(&attempts))
	require.Equal(t, 1, attempts, "the message was received once, and nacked when the store failed")
	letters, err := st.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: b.cfg.Name})
	require.NoError(t, err)
	require.Empty(t, letters)
}
