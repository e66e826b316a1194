package seqbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
)

// batchEffects is a BatchHandler writing one row per event in one
// multi-row INSERT, and remembering what each call was handed.
type batchEffects struct {
	mu    sync.Mutex
	calls [][]string
	// fail, when it returns an error for an event, fails the whole call
	// that holds it.
	fail func(ev seqboxtype.Event, alone bool) error
}

func (h *batchEffects) handle(ctx context.Context, tx seqbox.Tx, evs []seqboxtype.Event) error {
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	h.mu.Lock()
	h.calls = append(h.calls, ids)
	h.mu.Unlock()
	if h.fail != nil {
		for _, ev := range evs {
			if err := h.fail(ev, len(evs) == 1); err != nil {
				return err
			}
		}
	}
	rows := make([]string, len(evs))
	args := make([]any, 0, 2*len(evs))
	for i, ev := range evs {
		rows[i] = fmt.Sprintf("($%d, $%d)", 2*i+1, 2*i+2)
		args = append(args, ev.ID, ev.PartitionKey)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO batch_effects (id, partitionkey) VALUES `+strings.Join(rows, ", "), args...)
	return err
}

func batchSetup(t *testing.T) (*bundle, *batchEffects) {
	t.Helper()
	b := setup(t)
	_, err := b.store.DB().Exec(`CREATE TABLE batch_effects (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, partitionkey TEXT NOT NULL)`)
	require.NoError(t, err)
	h := &batchEffects{}
	b.cfg.Handler, b.cfg.BatchHandler = nil, h.handle
	return b, h
}

// effectIDs lists the effect rows' ids in the order they were written.
func effectIDs(t *testing.T, b *bundle) []string {
	t.Helper()
	rows, err := b.store.DB().Query(`SELECT id FROM batch_effects ORDER BY seq`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	return out
}

func versioned(key string, v int) []byte {
	return fmt.Appendf(nil, `{"id":"%s-v%d","source":"erp","type":"t","partitionkey":"%s","objectversion":%d}`, key, v, key, v)
}

// A batch's applied events reach the BatchHandler in one call, each key's
// in version order, even when they arrived out of order; duplicates and
// stale versions are not handed over.
func TestBatchHandlerGetsTheAppliedEventsInOneCall(t *testing.T) {
	b, h := batchSetup(t)
	c := b.consumer(t)
	ctx := context.Background()
	_, err := c.DeliverBatch(ctx, [][]byte{versioned("a", 1), versioned("a", 2), versioned("b", 1)})
	require.NoError(t, err)
	out, err := c.DeliverBatch(ctx, [][]byte{
		versioned("b", 3), versioned("a", 4), versioned("b", 2), versioned("a", 3),
		versioned("a", 2), // duplicate
		versioned("a", 1), // stale... and a duplicate too
		versioned("c", 1),
	})
	require.NoError(t, err)
	got := map[string]seqboxtype.Outcome{}
	for _, rs := range out {
		for _, r := range rs {
			got[r.ID] = r.Outcome
		}
	}
	require.Equal(t, seqboxtype.Applied, got["b-v3"], "unparked by b-v2 in the same batch")
	require.Equal(t, seqboxtype.Duplicate, got["a-v2"])
	require.Equal(t, [][]string{{"a-v1", "a-v2", "b-v1"}, {"b-v2", "b-v3", "a-v3", "a-v4", "c-v1"}}, h.calls,
		"one call per batch, each key in version order")
	require.Equal(t, []string{"a-v1", "a-v2", "b-v1", "b-v2", "b-v3", "a-v3", "a-v4", "c-v1"}, effectIDs(t, b))
}

// When the batch call fails, the batch runs again with savepoints and the
// handler gets one event at a time: the poison event alone is dead-
// lettered (and blocks its key), every other event applies once, and
// nothing of the failed calls commits.
func TestBatchHandlerFailureFallsBackToOneEventPerCall(t *testing.T) {
	b, h := batchSetup(t)
	h.fail = func(ev seqboxtype.Event, alone bool) error {
		if ev.ID == "b-v1" {
			return seqbox.Permanent(errors.New("malformed order"))
		}
		return nil
	}
	c := b.consumer(t)
	out, err := c.DeliverBatch(context.Background(), [][]byte{
		versioned("a", 1), versioned("b", 1), versioned("b", 2), versioned("c", 1),
	})
	require.NoError(t, err)
	got := map[string]seqboxtype.Outcome{}
	for _, rs := range out {
		for _, r := range rs {
			got[r.ID] = r.Outcome
		}
	}
	require.Equal(t, map[string]seqboxtype.Outcome{
		"a-v1": seqboxtype.Applied, "b-v1": seqboxtype.DeadLettered, "b-v2": seqboxtype.Blocked, "c-v1": seqboxtype.Applied,
	}, got)
	require.Equal(t, [][]string{{"a-v1", "b-v1", "b-v2", "c-v1"}, {"a-v1"}, {"b-v1"}, {"c-v1"}}, h.calls,
		"the failed call (b-v2 followed b-v1 there), then one event per call")
	require.Equal(t, []string{"a-v1", "c-v1"}, effectIDs(t, b))
}

// A panic in the batch call is a failure like any other: the rerun finds
// the event that panics, which is dead-lettered, and the consumer lives.
func TestBatchHandlerPanicIsOneEventsFailure(t *testing.T) {
	b, h := batchSetup(t)
	h.fail = func(ev seqboxtype.Event, alone bool) error {
		if ev.ID == "a-v2" {
			panic("nil map")
		}
		return nil
	}
	c := b.consumer(t)
	out, err := c.DeliverBatch(context.Background(), [][]byte{versioned("a", 1), versioned("a", 2), versioned("z", 1)})
	require.NoError(t, err)
	require.Equal(t, seqboxtype.DeadLettered, out[1][0].Outcome)
	require.Contains(t, out[1][0].Reason, "handler panicked: nil map")
	require.Equal(t, []string{"a-v1", "z-v1"}, effectIDs(t, b))
}

// Handler and BatchHandler exclude each other, and a BatchHandler cannot
// take a recorded agent decision.
func TestBatchHandlerConfig(t *testing.T) {
	b, h := batchSetup(t)
	cfg := b.cfg
	cfg.Handler = func(context.Context, seqbox.Tx, seqboxtype.Event) error { return nil }
	_, err := seqbox.NewConsumer(cfg)
	require.ErrorContains(t, err, "set Handler or BatchHandler, not both")
	cfg = b.cfg
	cfg.Decide = func(context.Context, seqboxtype.Event) ([]byte, error) { return nil, nil }
	_, err = seqbox.NewConsumer(cfg)
	require.ErrorContains(t, err, "cannot be combined with Decide")
	cfg = b.cfg
	cfg.BatchHandler = nil
	_, err = seqbox.NewConsumer(cfg)
	require.ErrorContains(t, err, "Handler")
	require.Empty(t, h.calls)
}
