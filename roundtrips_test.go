package seqbox_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
)

// On PostgreSQL an optimistic batch is four round trips whatever its size:
// BEGIN; the keys' locks, their flags and the identities in one pipeline;
// the handlers' writes and the keys' moves in another; COMMIT. Before, the
// locks, the flags, the identities and the moves were a round trip each,
// seven in all.
func TestBatchRoundTripsOnPostgres(t *testing.T) {
	ctx := context.Background()
	rt, st := countedPostgres(t)
	_, err := st.DB().ExecContext(ctx, `CREATE TABLE rt (id TEXT PRIMARY KEY, v BIGINT NOT NULL)`)
	require.NoError(t, err)
	c, err := seqbox.NewConsumer(seqbox.Config{Name: "rt", Store: st,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO rt (id, v) VALUES ($1, $2)`, ev.ID, *ev.ObjectVersion)
			return err
		}})
	require.NoError(t, err)
	batch := func(version, n int) [][]byte {
		raws := make([][]byte, n)
		for i := range raws {
			raws[i] = fmt.Appendf(nil, `{"id":"v%d-%d","source":"erp","type":"t","partitionkey":"k%d","objectversion":%d}`,
				version, i, i, version)
		}
		return raws
	}
	// The first batches create the keys and prepare the statements.
	for v := 1; v <= 2; v++ {
		_, err := c.DeliverBatch(ctx, batch(v, 200))
		require.NoError(t, err)
	}
	for v, n := range []int{3: 200, 4: 20} {
		if n == 0 {
			continue
		}
		before := rt.Count()
		out, err := c.DeliverBatch(ctx, batch(v, n))
		require.NoError(t, err)
		for _, results := range out {
			require.Equal(t, seqboxtype.Applied, results[len(results)-1].Outcome)
		}
		require.EqualValues(t, 4, rt.Count()-before, "round trips of a batch of %d", n)
	}
}

// A consumer with Decide runs its decided messages again in one optimistic
// batch, whose gate tells from what the prefetch read under the keys'
// locks that no other identity holds a key's turn
// (batchTx.noOtherRetrying). Before, each message read its key's turn
// (RetryOnKey), sending the run's deferred writes first: four round trips
// or more a message, on top of its decision's two (its look before the
// ask, and its record).
func TestOptimisticBatchReadsNoTurnPerMessage(t *testing.T) {
	ctx := context.Background()
	rt, st := countedPostgres(t)
	c, err := seqbox.NewConsumer(seqbox.Config{Name: "turns", Store: st,
		Decide:  func(context.Context, seqboxtype.Event) ([]byte, error) { return []byte("ok"), nil },
		Handler: func(context.Context, seqbox.Tx, seqboxtype.Event) error { return nil }})
	require.NoError(t, err)
	batch := func(round, n int) [][]byte {
		raws := make([][]byte, n)
		for i := range raws {
			raws[i] = fmt.Appendf(nil, `{"id":"r%d-%d","source":"crm","type":"t","partitionkey":"k%d-%d","objectversion":1}`,
				round, i, round, i)
		}
		return raws
	}
	trips := func(round, n int) int64 {
		before := rt.Count()
		out, err := c.DeliverBatch(ctx, batch(round, n))
		require.NoError(t, err)
		for _, results := range out {
			require.Equal(t, seqboxtype.Applied, results[len(results)-1].Outcome)
		}
		return rt.Count() - before
	}
	trips(0, 50) // prepares the statements
	small, large := trips(1, 20), trips(2, 120)
	perMessage := float64(large-small) / 100
	t.Logf("round trips: %d for 20 messages, %d for 120: %.2f a message", small, large, perMessage)
	require.LessOrEqual(t, perMessage, 2.5, "round trips a message: its decision's look and record, and no read of its key's turn")
}

// countedPostgres opens a PostgreSQL store whose round trips rt counts, on
// one connection: pgx prepares a statement once per connection, and a
// second one would prepare them again.
func countedPostgres(t *testing.T) (*pgtest.RoundTrips, store.Store) {
	rt, u := pgtest.Proxy(t, pgtest.URL(t))
	st, err := postgres.Open(context.Background(), u)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	st.DB().SetMaxOpenConns(1)
	return rt, st
}
