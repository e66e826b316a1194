package seqbox_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/own"
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
	rt, c := countedDecider(t, "turns")
	trips := func(round, n int) int64 {
		return deliverCounted(t, rt, c, n, func(i int) string {
			return fmt.Sprintf(`{"id":"r%d-%d","source":"crm","type":"t","partitionkey":"k%d-%d","objectversion":1}`, round, i, round, i)
		})
	}
	trips(0, 50) // prepares the statements
	small, large := trips(1, 20), trips(2, 120)
	perMessage := float64(large-small) / 100
	t.Logf("round trips: %d for 20 messages, %d for 120: %.2f a message", small, large, perMessage)
	require.LessOrEqual(t, perMessage, 2.5, "round trips a message: its decision's look and record, and no read of its key's turn")
}

// Both transactions of a decided message on PostgreSQL are four round
// trips, whatever the batch (and however many stages its decisions
// take): BEGIN, one pipeline with the keys' locks,
// the identities and the reads ahead (the keys' retry rows, the
// decisions, the turns), one pipeline with the deferred writes (the
// identities taken back, the turns and claims of the messages stopped,
// the key moves, the retry clears), and COMMIT. Before, the reads ahead
// and the stopped messages' writes were a round trip each: sixteen for
// the two where eight are needed. Between the two, each message's
// decider looks once and records once, alone or with others'.
func TestDecidedMessageTransactionsAreFourRoundTripsOnPostgres(t *testing.T) {
	rt, st := countedPostgres(t)
	var commits atomic.Int64
	// A claim heartbeat of an hour: no claim is renewed, or taken again
	// for being older than a beat, on a loaded machine either; those are
	// round trips of their own, outside the transactions counted here.
	c, err := seqbox.NewConsumer(armed(seqbox.Config{Name: "decided-trips", Store: st, ClaimHeartbeat: time.Hour,
		Decide:  func(context.Context, seqboxtype.Event) ([]byte, error) { return []byte("ok"), nil },
		Handler: func(context.Context, seqbox.Tx, seqboxtype.Event) error { return nil }}, countCommits(&commits)))
	require.NoError(t, err)
	trips := versionTrips(t, rt, c, &commits)
	trips(1, 60) // creates the keys and prepares the statements
	for v, n := range []int{2: 60, 3: 20} {
		if n == 0 {
			continue
		}
		// Decisions that come in more than 50 ms apart (a loaded machine)
		// are applied in transactions of their own: count them. A
		// statement text new to the connection costs one round trip more,
		// once (pgx prepares it): the identities' insert is spelled
		// differently when all of a batch's rows share a column's value,
		// as a one-message stage's do. Before, a transaction took eight.
		// The deciders' looks and records go to the server together when
		// they are made at the same time (sqlstore's pipeGroup): two
		// round trips at least, two a message at most.
		got, txs := trips(v, n)
		require.GreaterOrEqual(t, txs, int64(2), "a first pass and an apply at least")
		require.GreaterOrEqual(t, got, 4*txs+2, "four round trips a transaction, and the looks' and the records' sends")
		require.Less(t, got, 5*txs+2*int64(n), "round trips of %d transactions for a batch of %d decided messages (%d in all): four each", txs, n, got)
	}
}

// versionTrips delivers to c, in one batch, version v of keys k0..k(n-1),
// each required applied, and returns the round trips rt counted and the
// commits counted in commits (countCommits).
func versionTrips(t *testing.T, rt *pgtest.RoundTrips, c *seqbox.Consumer, commits *atomic.Int64) func(v, n int) (trips, txs int64) {
	return func(v, n int) (int64, int64) {
		before := commits.Load()
		got := deliverCounted(t, rt, c, n, func(i int) string {
			return fmt.Sprintf(`{"id":"v%d-%d","source":"crm","type":"t","partitionkey":"k%d","objectversion":%d}`, v, i, i, v)
		})
		return got, commits.Load() - before
	}
}

// countCommits is a fault hook that counts the commits it sees in n.
func countCommits(n *atomic.Int64) fault.Hook {
	return func(p fault.Point) error {
		if p == fault.BeforeCommit {
			n.Add(1)
		}
		return nil
	}
}

// The gateway's handler keeps each applied envelope through the batch's
// store transaction (own.Tx, store.ExecutorTx.GatewayEnvelopeInsert). On
// PostgreSQL that write joins the handlers' queue, as their own writes
// do: a batch stays four round trips, where each envelope was one more.
func TestGatewayEnvelopeWritesGoInTheBatchsRoundTrip(t *testing.T) {
	rt, st := countedPostgres(t)
	var commits atomic.Int64
	c, err := seqbox.NewConsumer(armed(seqbox.Config{Name: "envelopes", Store: st,
		Handler: func(ctx context.Context, _ seqbox.Tx, ev seqboxtype.Event) error {
			tx, err := own.Tx(ctx)
			if err != nil {
				return err
			}
			return tx.GatewayEnvelopeInsert(ctx, store.GatewayEnvelope{Consumer: "envelopes", Source: ev.Source, ID: ev.ID,
				Envelope: ev.Raw, AppliedAt: time.Now()})
		}}, countCommits(&commits)))
	require.NoError(t, err)
	trips := versionTrips(t, rt, c, &commits)
	trips(1, 50) // creates the keys and prepares the statements
	got, txs := trips(2, 50)
	require.GreaterOrEqual(t, txs, int64(1))
	// Four a transaction, and at most a first preparation of a statement
	// text each (see TestDecidedMessageTransactionsAreFourRoundTripsOnPostgres).
	require.GreaterOrEqual(t, got, 4*txs)
	require.Less(t, got, 5*txs, "round trips of a batch of 50 whose handlers keep their envelopes, in %d transactions", txs)
	env, err := st.Executor().GatewayEnvelopeGet(context.Background(), store.MessageRef{Consumer: "envelopes", Source: "crm", ID: "v2-49"})
	require.NoError(t, err)
	require.Contains(t, string(env), `"id":"v2-49"`)
}

// countedDecider is a consumer with Decide (deciding "ok" at once) and a
// handler that writes nothing, on a store whose round trips rt counts.
func countedDecider(t *testing.T, name string) (*pgtest.RoundTrips, *seqbox.Consumer) {
	rt, st := countedPostgres(t)
	c, err := seqbox.NewConsumer(seqbox.Config{Name: name, Store: st,
		Decide:  func(context.Context, seqboxtype.Event) ([]byte, error) { return []byte("ok"), nil },
		Handler: func(context.Context, seqbox.Tx, seqboxtype.Event) error { return nil }})
	require.NoError(t, err)
	return rt, c
}

// deliverCounted delivers n messages (message(i) each) to c in one batch,
// requires each applied, and returns the round trips rt counted.
func deliverCounted(t *testing.T, rt *pgtest.RoundTrips, c *seqbox.Consumer, n int, message func(i int) string) int64 {
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = []byte(message(i))
	}
	before := rt.Count()
	out, err := c.DeliverBatch(context.Background(), raws)
	require.NoError(t, err)
	for _, results := range out {
		require.Equal(t, seqboxtype.Applied, results[len(results)-1].Outcome)
	}
	return rt.Count() - before
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
