package sqlstore_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
)

// A business key is reserved atomically on PostgreSQL (docs/design.md
// §10.2, issue 36 class 1): transaction A takes the business key's lock,
// finds no other identity in flight and takes its turn, and has not
// committed yet. Transaction B, checking the same business key for
// another identity under READ COMMITTED, must not find it free: with the
// lock it waits for A's commit and then sees A's turn. Without the lock
// (a BusinessKeyLock that takes nothing) B reads before A commits, finds
// nothing, and both identities reach the agent.
//
// Deterministic: the test commits A only once B has either answered or is
// waiting for the advisory lock (pg_locks), never on a timer.
func TestBusinessKeyLockSerialisesTheCheckAndTheTurn(t *testing.T) {
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	const consumer, bk = "c", "followup:1"
	refA := store.BusinessKeyRef{Consumer: consumer, BusinessKey: bk, Source: "crm", ID: "a"}
	refB := store.BusinessKeyRef{Consumer: consumer, BusinessKey: bk, Source: "crm", ID: "b"}

	a, err := st.Begin(ctx)
	require.NoError(t, err)
	defer a.Rollback()
	require.NoError(t, a.BusinessKeyLock(ctx, refA))
	_, err = a.BusinessKeyInFlight(ctx, refA)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = a.TurnTake(ctx, store.TurnTakeParams{Consumer: consumer, Source: "crm", ID: "a", PartitionKey: "k1",
		BusinessKey: bk, PayloadHash: "hash-a", At: time.Now()})
	require.NoError(t, err)

	type answer struct {
		id  store.Identity
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		b, err := st.Begin(ctx)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer b.Rollback()
		if err := b.BusinessKeyLock(ctx, refB); err != nil {
			answered <- answer{err: err}
			return
		}
		id, err := b.BusinessKeyInFlight(ctx, refB)
		answered <- answer{id, err}
	}()

	// Wait until B answered or waits for the business key's lock.
	var got *answer
	for got == nil {
		select {
		case r := <-answered:
			got = &r
			continue
		default:
		}
		var waiting int
		require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT count(*) FROM pg_locks l
			WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 1
			AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended($1, $2)`,
			consumer+"/"+bk, dialect.BusinessKeyLockSeed).Scan(&waiting))
		if waiting > 0 {
			break
		}
		runtime.Gosched()
	}
	require.NoError(t, a.Commit())
	if got == nil {
		r := <-answered
		got = &r
	}
	require.NoError(t, got.err, "B found the business key free while A, which holds its turn, was committing: not reserved atomically")
	require.Equal(t, store.Identity{Source: "crm", ID: "a"}, got.id)
}
