package embedded_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/transport/embedded"
)

// On PostgreSQL a publish of any size, grouped or not, is one statement
// and one round trip: it needs no transaction of its own around it (it
// was BEGIN, INSERT, COMMIT). All or none still holds: a batch the
// database refuses leaves nothing behind.
func TestPostgresPublishIsOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	rt, u := pgtest.Proxy(t, pgtest.URL(t))
	q, err := embedded.Open(ctx, u, embedded.Config{Name: "one"})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	bodies := make([][]byte, 300)
	groups := make([]string, len(bodies))
	for i := range bodies {
		bodies[i], groups[i] = fmt.Appendf(nil, `{"n":%d}`, i), fmt.Sprintf("g%d", i%7)
	}
	// The first of each kind prepares its statement on the connection.
	require.NoError(t, q.PublishBatch(ctx, bodies[:1]))
	require.NoError(t, q.PublishGrouped(ctx, bodies[:1], groups[:1]))
	for _, publish := range []func() error{
		func() error { return q.PublishBatch(ctx, bodies) },
		func() error { return q.PublishGrouped(ctx, bodies, groups) },
	} {
		before := rt.Count()
		require.NoError(t, publish())
		require.EqualValues(t, 1, rt.Count()-before)
	}
	ready, _, err := q.Depth(ctx)
	require.NoError(t, err)
	require.Equal(t, 2+2*len(bodies), ready)

	bad := append([][]byte{[]byte("ok")}, []byte("\x00ok"))
	require.Error(t, q.PublishGrouped(ctx, bad, []string{"g", "g\x00"}), "a NUL in a text column is refused")
	after, _, err := q.Depth(ctx)
	require.NoError(t, err)
	require.Equal(t, ready, after, "nothing of the refused batch was published")
}

// A nil body is refused by name, and a batch holding one publishes
// nothing; an empty body is a message. Before, the refusal was the
// database's "NOT NULL constraint failed: seqbox_queue.body".
func TestPublishRefusesANilBody(t *testing.T) {
	ctx := context.Background()
	q, err := embedded.Open(ctx, filepath.Join(t.TempDir(), "q.db"), embedded.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	require.ErrorContains(t, q.Publish(ctx, nil), "embedded queue: publish: the body is nil")
	require.ErrorContains(t, q.PublishBatch(ctx, [][]byte{[]byte(`{}`), nil}), "(message 1 of the batch)")
	ready, _, err := q.Depth(ctx)
	require.NoError(t, err)
	require.Zero(t, ready)
	require.NoError(t, q.Publish(ctx, []byte{}))
}
