package seqbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/sqlitedb"
)

// A consumer whose embedded queue lives in its SQLite store's file
// acknowledges in each batch's own transaction, with the same statement
// every time. It is compiled once per connection through the store's
// statement cache, not in every batch: run on the *sql.Tx, SQLite
// compiled it, and its delete trigger with it, for every batch, three
// quarters of the statements the agent path compiled.
func TestTheAckInTheBatchIsCompiledOnce(t *testing.T) {
	b := setup(t)
	q := openQueue(t, b.path, time.Minute)
	b.cfg.Transport = q
	c := b.consumer(t)
	stop, ok := sqlitedb.RecordStatements()
	require.True(t, ok, "another recording runs")
	const rounds = 6
	for r := range rounds {
		ids := taskIDs(string(rune('a'+r)), 3)
		publishTasks(t, q, ids...)
		require.NoError(t, runUntil(t, c, func() bool { return unacked(t, q) == 0 }))
	}
	var ack *sqlitedb.StatementTime
	for _, s := range stop() {
		if strings.HasPrefix(s.Query, "DELETE FROM seqbox_queue WHERE seq IN") {
			ack = &s
			break
		}
	}
	require.NotNil(t, ack, "the batches acknowledged in their transactions")
	require.GreaterOrEqual(t, ack.Count, int64(rounds), "a batch a round at least")
	require.LessOrEqual(t, ack.Prepares, int64(2), "compiled %d times in %d runs", ack.Prepares, ack.Count)
}
