package seqbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/internal/waitfor"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/transport/embedded"
)

// On PostgreSQL a group's next message becomes ready when the transaction
// that acknowledged its predecessor commits. The receiver woken by AckIn
// looked before that commit and found nothing; it is woken again once the
// commit is through (transport.TxAckCommitter), so a key's chain does not
// wait for the queue's poll. The poll here is an hour: only a wake-up can
// bring m2 in.
func TestGroupsNextMessageIsReceivedAfterTheAckCommitsOnPostgres(t *testing.T) {
	ctx := context.Background()
	c, st, q := pgQueued(t, "wake-after-commit", embedded.Config{PollInterval: time.Hour, Wait: time.Hour}, seqbox.Config{})
	runCtx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- c.Run(runCtx) }()
	defer func() {
		cancel()
		require.NoError(t, <-errc)
	}()
	applied := func(id string) bool {
		seen, err := st.Executor().InboxSeen(ctx, store.MessageRef{Consumer: "wake-after-commit", Source: "crm", ID: id})
		return err == nil && seen.Outcome == "applied"
	}
	require.NoError(t, q.PublishGrouped(ctx, [][]byte{keyed("m1", "k", 1), keyed("m2", "k", 2)}, []string{"k", "k"}))
	waitfor.That(t, 20*time.Second, "m1 applied", func() bool { return applied("m1") })
	waitfor.That(t, 20*time.Second, "m2 received and applied without waiting for an hour's poll", func() bool { return applied("m2") })
}

// pgQueued opens a PostgreSQL store and an embedded queue in it, both
// named name, and a consumer of them with the record handler; cfg sets
// the rest of the consumer's config.
func pgQueued(t *testing.T, name string, qcfg embedded.Config, cfg seqbox.Config, crash ...fault.Hook) (*seqbox.Consumer, store.Store, *embedded.Queue) {
	t.Helper()
	ctx := context.Background()
	u := pgtest.URL(t)
	st, err := postgres.Open(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, replay.EnsureRecordTables(ctx, st.DB()))
	qcfg.Name = name
	q, err := embedded.Open(ctx, u, qcfg)
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	cfg.Name, cfg.Store, cfg.Transport, cfg.Handler = name, st, q, replay.RecordHandler(name)
	for _, h := range crash {
		cfg = armed(cfg, h)
	}
	c, err := seqbox.NewConsumer(cfg)
	require.NoError(t, err)
	return c, st, q
}
