package ops

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// searchExecutor holds many quiet keys and one held one, and records the
// views it was asked for.
type searchExecutor struct {
	store.Executor // any other query panics
	names          []string
	held           store.KeyView
	asked          *[]store.KeyViewListParams
}

func (s searchExecutor) KeyNameList(context.Context, store.KeyNameListParams) ([]string, error) {
	return append([]string(nil), s.names...), nil
}

func (s searchExecutor) KeyViewList(_ context.Context, p store.KeyViewListParams) ([]store.KeyView, error) {
	*s.asked = append(*s.asked, p)
	if p.Stuck {
		return []store.KeyView{s.held}, nil
	}
	var out []store.KeyView
	for _, k := range p.Keys {
		out = append(out, store.KeyView{KeyState: store.KeyState{Key: k, Version: ptr(1)}})
	}
	return out, nil
}

func (s searchExecutor) ParkedPage(context.Context, store.ParkedPageParams) ([]store.Parked, error) {
	return nil, nil
}

func (s searchExecutor) RetryOnKey(context.Context, store.KeyRef) (store.RetryRow, error) {
	return store.RetryRow{}, store.ErrNotFound
}

func (s searchExecutor) RetryRowsOnKeys(context.Context, store.KeysRef) (map[string][]store.Identity, error) {
	return map[string][]store.Identity{}, nil
}

// A search reads every key's name but reports only the stuck keys and
// the page it returns, whatever the number of keys that match.
func TestSearchKeysReportsOnlyItsPage(t *testing.T) {
	ex := searchExecutor{asked: new([]store.KeyViewListParams)}
	for i := range 5000 {
		ex.names = append(ex.names, fmt.Sprintf("order-%04d", i))
	}
	ex.held = store.KeyView{KeyState: store.KeyState{Key: "order-4000", Version: ptr(3)}, Held: 1, Parked: 1,
		OldestParked: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), NextVersion: ptr(5)}
	r := Reporter{Op: ex, Consumer: "c"}
	reps, total, err := r.SearchKeys(context.Background(), "ORDER-4", 3)
	require.NoError(t, err)
	require.Equal(t, 1000, total, "order-4000 to order-4999 match")
	var got []string
	for _, rep := range reps {
		got = append(got, rep.PartitionKey+" "+rep.Status)
	}
	require.Equal(t, []string{"order-4000 held", "order-4001 ok", "order-4002 ok"}, got, "the held key first, then by key")
	require.Equal(t, []store.KeyViewListParams{{Consumer: "c", Stuck: true}, {Consumer: "c", Keys: []string{"order-4001", "order-4002"}}},
		*ex.asked, "the stuck keys, then the page's other keys: nothing else is viewed")

	*ex.asked = nil
	reps, total, err = r.SearchKeys(context.Background(), "order-0042", 3)
	require.NoError(t, err)
	require.Equal(t, 1, total)
	require.Len(t, reps, 1)
	require.Equal(t, "order-0042", reps[0].PartitionKey, "the exact match")
}
