package effects_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

// ledgerOfMany makes n calls succeed (ref-0 … ref-n-1), one fail
// (NotApplied) and one turn uncertain, and returns the identities' calls
// in that order.
func ledgerOfMany(t *testing.T, l *effects.Ledger, n int) []seqboxtype.Identity {
	t.Helper()
	ctx := context.Background()
	var ids []seqboxtype.Identity
	for i := range n + 2 {
		id := seqboxtype.Identity{Consumer: "crm-worker", Source: "crm", ID: fmt.Sprintf("evt-%d", i)}
		ids = append(ids, id)
		_, err := l.DoFor(ctx, id, "crm.create_task", func(ctx context.Context, key string) (string, error) {
			switch i {
			case n:
				return "", effects.NotApplied(errors.New("422: refused"))
			case n + 1:
				return "", errors.New("connection reset")
			}
			return fmt.Sprintf("ref-%d", i), nil
		})
		if i < n {
			require.NoError(t, err)
		} else {
			require.Error(t, err)
		}
	}
	return ids
}

// The ledger's keys are indexed for its open calls only: a succeeded call
// is found by its identity and action, and by its key too (a scan), and
// its key takes no place in an index that would grow with the ledger.
func TestOnlyOpenCallsKeepAnEntryInTheKeyIndex(t *testing.T) {
	const n = 300
	stores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		l, err := effects.New(st, effects.Config{})
		require.NoError(t, err)
		ids := ledgerOfMany(t, l, n)
		for i, id := range ids {
			key := effects.Key(id.Consumer, id.Source, id.ID, "crm.create_task")
			byKey, err := l.Get(ctx, key)
			require.NoError(t, err, id.ID)
			byCall, err := l.GetFor(ctx, id, "crm.create_task")
			require.NoError(t, err, id.ID)
			require.Equal(t, byKey, byCall, id.ID)
			switch i {
			case n:
				require.Equal(t, effects.Failed, byKey.State)
			case n + 1:
				require.Equal(t, effects.Uncertain, byKey.State)
			default:
				require.Equal(t, effects.Succeeded, byKey.State)
				require.Equal(t, fmt.Sprintf("ref-%d", i), byKey.Ref)
			}
		}
		_, err = l.Get(ctx, effects.Key("crm-worker", "crm", "evt-none", "crm.create_task"))
		require.ErrorContains(t, err, "no call has idempotency key")
		_, err = l.GetFor(ctx, seqboxtype.Identity{Consumer: "crm-worker", Source: "crm", ID: "evt-none"}, "crm.create_task")
		require.ErrorContains(t, err, "no call has idempotency key")

		// An operator resolves the uncertain call by its key, and the
		// ledger reads it back as resolved.
		last := ids[n+1]
		key := effects.Key(last.Consumer, last.Source, last.ID, "crm.create_task")
		require.NoError(t, l.Resolve(ctx, key, effects.Succeeded, "task-9", "ops", "found it in the CRM"))
		e, err := l.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, effects.Succeeded, e.State)
		require.Equal(t, "task-9", e.Ref)

		// A call named by its identity and action under a key that is not
		// its row's holds nothing; and a reconciliation of a call named so
		// finds it, succeeded or not.
		failed := ids[n]
		_, err = l.Record(ctx, effects.Effect{Consumer: failed.Consumer, Source: failed.Source, ID: failed.ID, Action: "crm.create_task",
			IdempotencyKey: "sbx-not-its-key", Calls: 1}, "ref-x", nil)
		require.ErrorIs(t, err, effects.ErrNotYours)
		got, err := l.ReconciledFor(ctx, last, "crm.create_task", effects.Reconciliation{Applied: true, Ref: "other"})
		require.NoError(t, err)
		require.Equal(t, "task-9", got.Ref, "a succeeded call is returned as it is")
	})
}

// On SQLite the entries of every index of the ledger beside its primary
// key are counted: with n succeeded calls, one failed and one resolved,
// the one failed call is all each holds.
func TestSucceededCallsLeaveNoEntryBesideThePrimaryKeyOnSQLite(t *testing.T) {
	const n = 300
	path := filepath.Join(t.TempDir(), "seqbox.db")
	st, err := sqlite.Open(context.Background(), path)
	require.NoError(t, err)
	defer st.Close()
	l, err := effects.New(st, effects.Config{})
	require.NoError(t, err)
	ids := ledgerOfMany(t, l, n)
	last := ids[n+1]
	require.NoError(t, l.Resolve(context.Background(), effects.Key(last.Consumer, last.Source, last.ID, "crm.create_task"),
		effects.Succeeded, "task-9", "ops", "found it in the CRM"))

	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var indexes []string
	rows, err := db.Query(`SELECT name FROM pragma_index_list('seqbox_effects') WHERE origin <> 'pk'`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		indexes = append(indexes, name)
	}
	require.NoError(t, rows.Err())
	require.Len(t, indexes, 2, "the open calls' keys and states are indexed")
	for _, name := range indexes {
		var entries int
		require.NoError(t, db.QueryRow(`SELECT coalesce(sum(ncell), 0) FROM dbstat WHERE name = ? AND pagetype = 'leaf'`, name).Scan(&entries))
		require.Equal(t, 1, entries, "index %s holds an entry for each call that is not succeeded, and only for those", name)
	}
}
