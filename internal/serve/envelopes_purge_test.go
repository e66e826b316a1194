package serve

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/stretchr/testify/require"
)

// The retention purge of the gateway's tables goes on batch after batch
// until none is left: every accepted identity and every envelope applied
// before the cutoff goes (each envelope leaving a tombstone), and the
// tombstones older than theirs go last. (Stopping after the first full
// batch, or returning after the first batch of envelopes, went through
// every test: they purged fewer rows than a batch.)
func TestPurgeEnvelopesGoesBatchAfterBatch(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seqbox.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	ex := st.Executor()
	count := func(table string) int {
		var n int
		require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM `+table+` WHERE consumer = 'gw'`).Scan(&n))
		return n
	}
	applied := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var copies []store.GatewayCopy
	for i := range 5 {
		id := fmt.Sprintf("e%d", i)
		copies = append(copies, store.GatewayCopy{Source: "crm", ID: id, PayloadHash: "h" + id, At: applied})
		require.NoError(t, ex.GatewayEnvelopeInsert(ctx, store.GatewayEnvelope{Consumer: "gw", Source: "crm", ID: id,
			Envelope: []byte(`{"id":"` + id + `"}`), AppliedAt: applied}))
	}
	_, err = ex.GatewayAccept(ctx, store.GatewayAcceptParams{Consumer: "gw", Copies: copies})
	require.NoError(t, err)
	require.Equal(t, []int{5, 5, 0}, []int{count("seqbox_gateway_accepted"), count("seqbox_gateway_envelopes"), count("seqbox_gateway_tombstones")})

	purgedAt := applied.Add(48 * time.Hour)
	n, err := purgeEnvelopes(ctx, ex, "gw", applied.Add(time.Hour), applied, purgedAt, 2)
	require.NoError(t, err)
	require.EqualValues(t, 5, n, "five envelopes in batches of two")
	require.Equal(t, []int{0, 0, 5}, []int{count("seqbox_gateway_accepted"), count("seqbox_gateway_envelopes"), count("seqbox_gateway_tombstones")})

	// A later run drops the tombstones older than its tombstone cutoff.
	n, err = purgeEnvelopes(ctx, ex, "gw", applied.Add(time.Hour), purgedAt.Add(time.Hour), purgedAt.Add(2*time.Hour), 2)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, count("seqbox_gateway_tombstones"))
}
