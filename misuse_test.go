package seqbox_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/stretchr/testify/require"
)

// DeliverTx with no transaction is refused before anything is written.
// Before, its statements ran on the pool, each committing on its own: the
// identity was recorded with no outcome and the handler's row was lost,
// so every later copy was a duplicate of an effect that never happened.
func TestDeliverTxWithoutATransactionIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.consumer(t)
	ev := []byte(`{"specversion":"1.0","id":"tx2","source":"crm","type":"t","partitionkey":"T2","objectversion":1}`)
	_, err := c.DeliverTx(context.Background(), nil, ev, 1)
	require.ErrorContains(t, err, "DeliverTx: tx is nil")
	require.Zero(t, b.inboxRows(t))
	results, err := c.Deliver(context.Background(), ev, 1)
	require.NoError(t, err)
	require.Equal(t, seqboxtype.Applied, results[0].Outcome)
	require.Equal(t, 1, b.effects(t, "tx2"))
}

// Values that overflow seqbox's arithmetic or its memory are refused,
// naming the field: a DLQ retention of math.MaxInt64 made DLQRetention +
// RedriveWindow negative and passed the retention check; a BatchSize of
// math.MaxInt overflowed the scheduler's room, and Run consumed nothing.
func TestConfigRefusesValuesThatOverflow(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg   seqbox.Config
		field string
	}{
		{seqbox.Config{Name: "c", Policies: seqbox.Policies{DLQRetention: math.MaxInt64, RedriveWindow: time.Hour}}, "Retention"},
		{seqbox.Config{Name: "c", BatchSize: math.MaxInt}, "BatchSize"},
		{seqbox.Config{Name: "c", Workers: 1_000_000}, "Workers"},
		{seqbox.Config{Name: "c", DecideConcurrency: math.MaxInt}, "DecideConcurrency"},
		// Beyond it the crash-loop bound (four times it) overflowed, and
		// every message was dead-lettered on its first delivery.
		{seqbox.Config{Name: "c", Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: math.MaxInt}}}, "Retry.MaxAttempts"},
		{seqbox.Config{Name: "c", Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: seqbox.MaxRetryAttempts + 1}}}, "Retry.MaxAttempts"},
	} {
		err := c.cfg.ValidateSettings()
		require.ErrorIs(t, err, seqbox.ErrInvalidConfig, "%+v", c.cfg)
		require.ErrorContains(t, err, c.field+":")
	}
	ok := seqbox.Config{Name: "c", Workers: seqbox.MaxWorkers, BatchSize: seqbox.MaxBatchSize, DecideConcurrency: seqbox.MaxDecideConcurrency,
		Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: seqbox.MaxRetryAttempts}}}
	require.NoError(t, ok.ValidateSettings())
}

// A first backoff longer than the cap is a mistake, not a policy: the
// first retry would wait the cap, and every later one too. It is refused
// naming both, with the default cap named as the default. The same value
// on both sides (a constant backoff) is taken.
func TestConfigRefusesAFirstBackoffAboveItsCap(t *testing.T) {
	t.Parallel()
	bad := seqbox.Config{Name: "c", Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{InitialBackoff: time.Minute, MaxBackoff: time.Second}}}
	err := bad.ValidateSettings()
	require.ErrorIs(t, err, seqbox.ErrInvalidConfig)
	require.ErrorContains(t, err, "Retry.InitialBackoff: 1m0s is longer than Retry.MaxBackoff 1s")
	overDefault := seqbox.Config{Name: "c", Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{InitialBackoff: 10 * time.Minute}}}
	require.ErrorContains(t, overDefault.ValidateSettings(), "Retry.MaxBackoff 5m0s (the default)")
	constant := seqbox.Config{Name: "c", Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{InitialBackoff: time.Second, MaxBackoff: time.Second}}}
	require.NoError(t, constant.ValidateSettings())
}

// A handler that ends seqbox's transaction itself (COMMIT or ROLLBACK
// through tx, on SQLite) is told so at once, and nothing of the delivery
// is committed: the statement is refused, not run. Before, the COMMIT ran,
// committed the identity and the handler's row, and the next statement
// waited two minutes for the writer turn its own batch held, then blamed
// seqbox's contention.
func TestHandlerThatEndsTheTransactionIsRefused(t *testing.T) {
	t.Parallel()
	for _, stmt := range []string{"COMMIT", "ROLLBACK", "END TRANSACTION", "BEGIN"} {
		t.Run(stmt, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			_, err := b.store.DB().Exec(`CREATE TABLE fx (id TEXT PRIMARY KEY)`)
			require.NoError(t, err)
			b.cfg.Policies.Retry.MaxAttempts = 1
			b.cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO fx VALUES ($1)`, ev.ID); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, stmt)
				return err
			}
			c := b.consumer(t)
			results, err := c.Deliver(context.Background(), []byte(`{"specversion":"1.0","id":"h1","source":"crm","type":"t"}`), 1)
			require.NoError(t, err)
			require.Equal(t, seqboxtype.DeadLettered, results[0].Outcome)
			require.Contains(t, results[0].Reason, stmt+" inside the transaction seqbox opened")
			var n int
			require.NoError(t, b.store.DB().QueryRow(`SELECT COUNT(*) FROM fx`).Scan(&n))
			require.Zero(t, n, "the handler's row was committed")
		})
	}
}
