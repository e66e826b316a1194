package drivertest

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// deadLetter is a DLQ row of consumer with every column set; n varies the
// values. Seq, State, Resolution and ResolvedAt are the store's.
func deadLetter(consumer, id string, n int) store.DeadLetter {
	return store.DeadLetter{
		Consumer: consumer, Source: "crm", ID: id, PartitionKey: fmt.Sprintf("order-%d", n%3),
		ObjectVersion: ptr(int64(n)), PayloadHash: fmt.Sprintf("sha256:%064x", n),
		Envelope: []byte{'{', 0x00, byte(n), 0xff, '}'}, Reason: "handler failed permanently",
		Attempts: n + 1, FirstError: "first " + id, LastError: "last " + id, DeadAt: at(n),
	}
}

// dlqState reads a DLQ row's state in the transaction.
func (e *txEnv) dlqState(seq int64) (seqboxtype.DeadLetter, string, *time.Time) {
	e.t.Helper()
	var dls, resolution string
	var resolved sql.NullInt64
	require.NoError(e.t, e.tx.SQL().QueryRowContext(e.ctx, `SELECT state, resolution, resolved_at FROM seqbox_dlq WHERE seq = $1`, seq).
		Scan(&dls, &resolution, &resolved))
	if !resolved.Valid {
		return seqboxtype.DeadLetter(dls), resolution, nil
	}
	return seqboxtype.DeadLetter(dls), resolution, ptr(time.UnixMicro(resolved.Int64).UTC())
}

// DeadLetter stores every field of the row, open, and returns growing
// sequence numbers.
func testDeadLetter(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	d1, d2 := deadLetter(e.consumer, "1", 1), deadLetter(e.consumer, "2", 2)
	d2.ObjectVersion, d2.PartitionKey, d2.FirstError = nil, "", ""
	seq1, err := e.tx.DeadLetterInsert(e.ctx, d1)
	require.NoError(t, err)
	seq2, err := e.tx.DeadLetterInsert(e.ctx, d2)
	require.NoError(t, err)
	require.Positive(t, seq1)
	require.Greater(t, seq2, seq1)

	for seq, letter := range map[int64]store.DeadLetter{seq1: d1, seq2: d2} {
		var got store.DeadLetter
		var ver sql.NullInt64
		var dead int64
		require.NoError(t, e.tx.SQL().QueryRowContext(e.ctx, `SELECT consumer, source, id, partitionkey, objectversion,
			payload_hash, envelope, reason, attempts, first_error, last_error, dead_at FROM seqbox_dlq WHERE seq = $1`, seq).
			Scan(&got.Consumer, &got.Source, &got.ID, &got.PartitionKey, &ver, &got.PayloadHash, &got.Envelope,
				&got.Reason, &got.Attempts, &got.FirstError, &got.LastError, &dead))
		if ver.Valid {
			got.ObjectVersion = ptr(ver.Int64)
		}
		got.DeadAt = time.UnixMicro(dead).UTC()
		require.Equal(t, letter, got)
		dls, resolution, resolved := e.dlqState(seq)
		require.Equal(t, seqboxtype.DeadLetterOpen, dls)
		require.Empty(t, resolution)
		require.Nil(t, resolved)
	}
}

// DeadLetterResolve resolves an open row once: resolving it again, in
// any state, or a row of another consumer or none, is store.ErrNotFound.
func testResolveDeadLetter(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	seq1, err := tx.DeadLetterInsert(ctx, deadLetter(e.consumer, "1", 1))
	require.NoError(t, err)
	seq2, err := tx.DeadLetterInsert(ctx, deadLetter(e.consumer, "2", 2))
	require.NoError(t, err)

	require.NoError(t, tx.DeadLetterResolve(ctx, store.DeadLetterResolveParams{Consumer: e.consumer, Seq: seq1, State: seqboxtype.DeadLetterSkipped, Resolution: "skipped by ana: obsolete", At: at(10)}))
	dls, resolution, resolved := e.dlqState(seq1)
	require.Equal(t, seqboxtype.DeadLetterSkipped, dls)
	require.Equal(t, "skipped by ana: obsolete", resolution)
	require.Equal(t, ptr(at(10)), resolved)

	require.ErrorIs(t, tx.DeadLetterResolve(ctx, store.DeadLetterResolveParams{Consumer: e.consumer, Seq: seq1, State: seqboxtype.DeadLetterSkipped, Resolution: "again", At: at(11)}), store.ErrNotFound)
	require.ErrorIs(t, tx.DeadLetterResolve(ctx, store.DeadLetterResolveParams{Consumer: e.consumer, Seq: seq1, State: seqboxtype.DeadLetterRedriven, Resolution: "again", At: at(11)}), store.ErrNotFound)
	dls, resolution, resolved = e.dlqState(seq1)
	require.Equal(t, []any{seqboxtype.DeadLetterSkipped, "skipped by ana: obsolete", ptr(at(10))}, []any{dls, resolution, resolved},
		"the first resolution stays")

	require.ErrorIs(t, tx.DeadLetterResolve(ctx, store.DeadLetterResolveParams{Consumer: e.consumer + "/other", Seq: seq2, State: seqboxtype.DeadLetterSkipped, Resolution: "not theirs", At: at(12)}), store.ErrNotFound)
	require.ErrorIs(t, tx.DeadLetterResolve(ctx, store.DeadLetterResolveParams{Consumer: e.consumer, Seq: seq2 + 1_000_000, State: seqboxtype.DeadLetterSkipped, Resolution: "none", At: at(12)}), store.ErrNotFound)
	dls, _, _ = e.dlqState(seq2)
	require.Equal(t, seqboxtype.DeadLetterOpen, dls)

	require.NoError(t, tx.DeadLetterResolve(ctx, store.DeadLetterResolveParams{Consumer: e.consumer, Seq: seq2, State: seqboxtype.DeadLetterRedriveFailed, Resolution: "redrive_failed", At: at(13)}))
	dls, resolution, resolved = e.dlqState(seq2)
	require.Equal(t, []any{seqboxtype.DeadLetterRedriveFailed, "redrive_failed", ptr(at(13))}, []any{dls, resolution, resolved})
}

// DeadLetterInsert of an identity whose row is open (its redrive failed
// again) gives that row the failure and keeps its number: attempts add
// up, the reason, last error and time are the new ones, the first error
// and envelope stay, and History says it. Once the row is resolved, the
// identity's next failure is a row of its own.
func testDeadLetterKeepsItsNumber(t *testing.T, st store.Store) {
	e := beginTx(t, st)
	ctx, tx := e.ctx, e.tx
	first := deadLetter(e.consumer, "1", 1)
	other := deadLetter(e.consumer, "2", 2)
	seq, err := tx.DeadLetterInsert(ctx, first)
	require.NoError(t, err)
	otherSeq, err := tx.DeadLetterInsert(ctx, other)
	require.NoError(t, err)

	again := first
	again.Attempts, again.Reason, again.LastError, again.DeadAt = 3, "max attempts reached\nafter a redrive", "timeout", at(20)
	again.FirstError, again.Envelope = "not kept", []byte("not kept")
	seq2, err := tx.DeadLetterInsert(ctx, again)
	require.NoError(t, err)
	require.Equal(t, seq, seq2, "the identity's open row keeps its number")
	again.DeadAt, again.Reason = at(21), "handler failed permanently"
	seq3, err := tx.DeadLetterInsert(ctx, again)
	require.NoError(t, err)
	require.Equal(t, seq, seq3)

	got, err := tx.DeadLetterGet(ctx, store.DeadLetterRef{Consumer: e.consumer, Seq: seq})
	require.NoError(t, err)
	require.Equal(t, seqboxtype.DeadLetterOpen, got.State)
	require.Equal(t, []any{first.Attempts + 3 + 3, "handler failed permanently", first.FirstError, "timeout", at(21), first.Envelope, 2},
		[]any{got.Attempts, got.Reason, got.FirstError, got.LastError, got.DeadAt, got.Envelope, got.Redrives})
	require.Equal(t, []string{
		at(20).Format(time.RFC3339Nano) + ": failed again after a redrive (3 more attempts): max attempts reached after a redrive",
		at(21).Format(time.RFC3339Nano) + ": failed again after a redrive (3 more attempts): handler failed permanently",
	}, got.History)
	o, err := tx.DeadLetterGet(ctx, store.DeadLetterRef{Consumer: e.consumer, Seq: otherSeq})
	require.NoError(t, err)
	require.Equal(t, []any{other.Attempts, 0, []string(nil)}, []any{o.Attempts, o.Redrives, o.History}, "another identity's row is untouched")

	require.NoError(t, tx.DeadLetterResolve(ctx, store.DeadLetterResolveParams{Consumer: e.consumer, Seq: seq, State: seqboxtype.DeadLetterSkipped, Resolution: "skipped by ana: obsolete", At: at(30)}))
	seq4, err := tx.DeadLetterInsert(ctx, first)
	require.NoError(t, err)
	require.Greater(t, seq4, otherSeq, "a resolved row is not reopened")
	other.Consumer = e.consumer + "/other"
	seq5, err := tx.DeadLetterInsert(ctx, other)
	require.NoError(t, err)
	require.NotEqual(t, otherSeq, seq5, "another consumer's identity is its own")
	other.Consumer, other.PayloadHash = e.consumer, "sha256:another payload"
	seq6, err := tx.DeadLetterInsert(ctx, other)
	require.NoError(t, err)
	require.NotEqual(t, otherSeq, seq6, "another payload of the identity is a row of its own")
	// Rows of no identity (envelopes rejected before one was read) are
	// each their own.
	none := deadLetter(e.consumer, "", 7)
	none.Source = ""
	seq7, err := tx.DeadLetterInsert(ctx, none)
	require.NoError(t, err)
	seq8, err := tx.DeadLetterInsert(ctx, none)
	require.NoError(t, err)
	require.NotEqual(t, seq7, seq8, "rows of no identity are never merged")
}
