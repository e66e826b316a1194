package seqbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An operator reads in the log, one JSON line each, the retries, the dead
// letters, the rejected envelopes and the purges, each naming the event and
// the reason.
func TestLogsNameTheEventAndTheReason(t *testing.T) {
	ctx := context.Background()
	b := setup(t)
	var buf bytes.Buffer
	b.cfg.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	b.cfg.Now = func() time.Time { return time.Unix(0, now.Load()) }
	c := b.consumer(t)

	_, err := c.Deliver(ctx, []byte(`{"id":"t1","source":"erp","type":"t","partitionkey":"K","objectversion":1,"data":{"fail":"transient"}}`), 1)
	require.NoError(t, err)
	_, err = c.Deliver(ctx, []byte(`{"id":"p1","source":"erp","type":"t","partitionkey":"P","objectversion":1,"data":{"fail":"permanent"}}`), 1)
	require.NoError(t, err)
	_, err = c.Deliver(ctx, []byte(`{"id":"bad","source":"erp","type":"t","objectversion":"x"}`), 1)
	require.NoError(t, err)
	var rows float64
	require.NoError(t, b.store.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_inbox WHERE consumer = 'test'`).Scan(&rows))
	require.NotZero(t, rows)
	now.Add(int64(60 * 24 * time.Hour)) // past the default 30-day retention
	require.NoError(t, c.Maintain(ctx))

	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m), "%s", l)
		lines = append(lines, m)
	}
	find := func(msg string) map[string]any {
		for _, l := range lines {
			if l["msg"] == msg {
				return l
			}
		}
		t.Fatalf("no %q line in\n%s", msg, buf.String())
		return nil
	}
	retry := find("seqbox: delivery failed; it will be retried")
	require.Equal(t, []any{"WARN", "test", "erp", "t1", "K", 1.0, 1.0, "retry"},
		[]any{retry["level"], retry["consumer"], retry["source"], retry["id"], retry["key"], retry["version"], retry["attempt"], retry["outcome"]})
	require.Contains(t, retry["reason"], "data.fail=transient")
	dead := find("seqbox: dead-lettered; its key is blocked unless OnDeadLetter is release")
	require.Equal(t, []any{"ERROR", "p1", "P", "dead_lettered"}, []any{dead["level"], dead["id"], dead["key"], dead["outcome"]})
	require.Contains(t, dead["reason"], "data.fail=permanent")
	rejected := find("seqbox: envelope rejected and dead-lettered")
	require.Contains(t, rejected["reason"], "objectversion")
	purged := find("seqbox: retention purge removed expired identities")
	require.Equal(t, []any{"INFO", "test", rows}, []any{purged["level"], purged["consumer"], purged["removed"]})
}
