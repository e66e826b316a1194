package embedded

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/stretchr/testify/require"
)

// On PostgreSQL a receive walks the queue's index in seq order and stops
// after a batch, whatever the backlog and however stale the statistics
// (right after a burst of publishes they describe an empty table): no
// bitmap scan of every ready row, no sort, no scan of the whole table to
// join the locked rows back.
func TestPostgresLeasePlanWalksTheIndex(t *testing.T) {
	ctx := context.Background()
	q, err := Open(ctx, pgtest.URL(t), Config{Name: "plan"})
	require.NoError(t, err)
	defer q.Close()
	bodies := make([][]byte, 1000)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"n":%d}`, i)
	}
	for range 20 {
		require.NoError(t, q.PublishBatch(ctx, bodies))
	}
	_, err = q.Receive(ctx, 512) // a leased head, as in flight
	require.NoError(t, err)

	now := time.Now().UnixMicro()
	rows, err := q.db.QueryContext(ctx, "EXPLAIN "+q.leaseStatement(), "token", now+1, "plan", now, 512)
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan = append(plan, line)
	}
	require.NoError(t, rows.Err())
	text := strings.Join(plan, "\n")
	require.Contains(t, text, "Tid Scan", text)
	require.Contains(t, text, "Index Scan using seqbox_queue_order", text)
	for _, bad := range []string{"Seq Scan", "Bitmap", "Sort"} {
		require.NotContains(t, text, bad, text)
	}
}
