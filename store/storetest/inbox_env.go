package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// deliver delivers raw and returns the message's own result (the first).
func deliver(t *testing.T, c *seqbox.Consumer, raw []byte, attempt int) seqboxtype.Result {
	t.Helper()
	results, err := c.Deliver(context.Background(), raw, attempt)
	require.NoError(t, err)
	require.NotEmpty(t, results)
	return results[0]
}

func countEffects(t *testing.T, st store.Store, consumer, id string) int {
	t.Helper()
	var n int
	var err error
	if id == "" {
		err = st.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_record_effects WHERE consumer = $1`, consumer).Scan(&n)
	} else {
		err = st.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_record_effects WHERE consumer = $1 AND id = $2`, consumer, id).Scan(&n)
	}
	require.NoError(t, err)
	return n
}

func auditOutcomes(rows []store.AuditRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = string(r.Outcome)
	}
	return out
}

// event builds a structured-mode envelope from attributes.
func event(t *testing.T, attrs map[string]any) []byte {
	t.Helper()
	raw, err := json.Marshal(attrs)
	require.NoError(t, err)
	return raw
}

func simple(t *testing.T, id string) []byte {
	t.Helper()
	return event(t, map[string]any{"specversion": "1.0", "id": id, "source": "crm", "type": "task.create",
		"data": map[string]any{"task": "follow up " + id}})
}

// crashAt returns fault hooks that crash at point p, every time it is
// reached, and count how often that was.
func crashAt(p fault.Point, hits *atomic.Int32) func(fault.Point) error {
	return func(q fault.Point) error {
		if q != p {
			return nil
		}
		if hits != nil {
			hits.Add(1)
		}
		return fmt.Errorf("at %s: %w", q, fault.ErrCrash)
	}
}

// scriptedHandler wraps the record handler: call n (from 1) fails with
// errs[n-1] when that is not nil; calls past the script apply.
func scriptedHandler(name string, calls *atomic.Int32, errs ...error) seqbox.Handler {
	record := replay.RecordHandler(name)
	return func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		n := int(calls.Add(1))
		if n <= len(errs) && errs[n-1] != nil {
			return errs[n-1]
		}
		return record(ctx, tx, ev)
	}
}
