package embedded_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/testclock"
	"github.com/seqbox/seqbox/transport"
	"github.com/stretchr/testify/require"
)

func TestExtendBatchSQLite(t *testing.T) {
	testExtendBatch(t, filepath.Join(t.TempDir(), "queue.db"))
}

func TestExtendBatchPostgres(t *testing.T) { testExtendBatch(t, pgtest.URL(t)) }

// ExtendBatch extends, in one statement, every delivery that still holds
// its lease, whichever receive it came from, and reports the others as
// lost without touching their rows: one acknowledged, one whose lease ran
// out and went to another receive. A lease that ran out and that no one
// took since is still its holder's, as with Extend.
func testExtendBatch(t *testing.T, where string) {
	ctx := context.Background()
	b := &queueBundle{path: where, clock: testclock.At(time.Date(2026, 10, 9, 12, 0, 0, 0, time.UTC))}
	q := b.open(t, "extend")
	publish(t, q, "a", "b")
	first := receive(t, q, 2) // a, b under one lease
	require.Equal(t, []string{"a", "b"}, bodies(first))
	publish(t, q, "c", "d")
	second := receive(t, q, 2) // c, d under another
	require.Equal(t, []string{"c", "d"}, bodies(second))

	require.NoError(t, q.ExtendBatch(ctx, append(append([]transport.Delivery{}, first...), second...), time.Hour),
		"every lease held, across two receives")
	b.clock.Advance(lease + time.Second)
	require.Empty(t, receive(t, q, 4), "all four kept past their first lease")

	// b is acknowledged; the others' hour runs out, and a goes to
	// another receive before its old holder extends again.
	require.NoError(t, first[1].Ack(ctx))
	b.clock.Advance(time.Hour)
	again := receive(t, q, 1)
	require.Equal(t, []string{"a"}, bodies(again), "the oldest comes back first")
	err := q.ExtendBatch(ctx, []transport.Delivery{first[0], first[1], second[0]}, time.Hour)
	require.ErrorIs(t, err, transport.ErrLeaseLost)
	require.ErrorContains(t, err, "2 of 3 extensions", "a and b lost; c extended")

	// The lost ones were left alone: a is its new holder's until that
	// lease runs out. c is extended, d is not.
	require.Equal(t, []string{"d"}, bodies(receive(t, q, 4)))
	b.clock.Advance(lease + time.Second)
	require.Equal(t, []string{"a", "d"}, bodies(receive(t, q, 4)), "no extension reached a's new lease")
	require.Equal(t, [2]int{0, 3}, depth(t, q))
	require.NoError(t, second[0].Ack(ctx), "c's holder still holds it")
}

// On PostgreSQL ExtendBatch does not wait for a row another transaction
// holds (a batch acknowledging it): it extends the others and reports that
// one, which its transaction settles.
func TestExtendBatchSkipsLockedRowsPostgres(t *testing.T) {
	ctx := context.Background()
	b := &queueBundle{path: pgtest.URL(t), clock: testclock.At(time.Date(2026, 10, 9, 12, 0, 0, 0, time.UTC))}
	q := b.open(t, "extend-locked")
	publish(t, q, "a", "b")
	ds := receive(t, q, 2)
	require.Equal(t, []string{"a", "b"}, bodies(ds))

	db, err := pgdb.OpenWith(ctx, b.path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	require.NoError(t, q.AckIn(ctx, tx, ds[:1]), "a batch acknowledges a, not yet committed")

	// Waiting for the lock would hang (the test holds it): the deadline
	// only turns such a hang into a failure.
	within, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = q.ExtendBatch(within, ds, time.Hour)
	require.ErrorIs(t, err, transport.ErrLeaseLost)
	require.ErrorContains(t, err, "1 of 2 extensions", "a skipped, b extended")
	require.NoError(t, tx.Rollback())

	b.clock.Advance(lease + time.Second)
	require.Equal(t, []string{"a"}, bodies(receive(t, q, 2)), "b kept its extension; a, rolled back, had none")
}
