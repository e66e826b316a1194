package transporttest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

// EffectsStore is a seqbox store in a fresh SQLite file with an effects
// table that Record fills with one row per application, in commit order:
// what the suite's consumer tests check, and what a transport's own tests
// can use to check end to end that every event was applied once, in
// order.
type EffectsStore struct {
	path string
	st   store.Store
}

// NewEffectsStore opens one in t.TempDir(), closed when t ends.
func NewEffectsStore(t testing.TB) *EffectsStore {
	t.Helper()
	path := filepath.Join(t.TempDir(), "seqbox.db")
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.DB().Exec(`CREATE TABLE effects (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, pkey TEXT, version INTEGER)`); err != nil {
		t.Fatalf("create effects: %v", err)
	}
	return &EffectsStore{path: path, st: st}
}

// Store is the seqbox store, for a Consumer's Config.
func (r *EffectsStore) Store() store.Store { return r.st }

// Record is the handler: one effects row per application.
func Record(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
	v, _ := ev.Version()
	_, err := tx.ExecContext(ctx, `INSERT INTO effects (id, pkey, version) VALUES ($1, $2, $3)`, ev.ID, ev.PartitionKey, v)
	return err
}

// Applied returns each key's applied versions in commit order and the
// number of effect rows.
func (r *EffectsStore) Applied(t testing.TB) (map[string][]int64, int) {
	t.Helper()
	rows, err := r.st.DB().Query(`SELECT pkey, version FROM effects ORDER BY seq`)
	if err != nil {
		t.Fatalf("read effects: %v", err)
	}
	defer rows.Close()
	out, n := map[string][]int64{}, 0
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatalf("scan effects: %v", err)
		}
		out[k] = append(out[k], v)
		n++
	}
	return out, n
}
