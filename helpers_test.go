package seqbox_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/sqlite"
)

// bundle is what most tests need: a real SQLite file with the record
// handler's tables, and a consumer over it.
type bundle struct {
	path  string
	store store.Store
	cfg   seqbox.Config
}

// setup opens a fresh store in t.TempDir(); mutate the returned config
// before calling consumer.
func setup(t *testing.T) *bundle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "seqbox.db")
	st, err := sqlite.Open(context.Background(), path)
	require.NoError(t, err)
	return newBundle(t, path, st)
}

// setupPostgres is setup on a PostgreSQL schema of the test's own
// (pgtest.URL).
func setupPostgres(t *testing.T) *bundle {
	t.Helper()
	u := pgtest.URL(t)
	st, err := postgres.Open(context.Background(), u)
	require.NoError(t, err)
	return newBundle(t, u, st)
}

// newBundle is st, closed when the test ends, with the record handler's
// tables and a consumer's config over it.
func newBundle(t *testing.T, path string, st store.Store) *bundle {
	t.Helper()
	t.Cleanup(func() { st.Close() })
	require.NoError(t, replay.EnsureRecordTables(context.Background(), st.DB()))
	return &bundle{path: path, store: st, cfg: seqbox.Config{
		Name: "test", Store: st, Handler: replay.RecordHandler("test"),
		Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}},
	}}
}

func (b *bundle) consumer(t *testing.T) *seqbox.Consumer {
	t.Helper()
	c, err := seqbox.NewConsumer(b.cfg)
	require.NoError(t, err)
	return c
}

// armed is cfg with a crash hook at the fault points: seqbox's own way
// into a consumer, on the store it is given (internal/own).
func armed(cfg seqbox.Config, hook fault.Hook) seqbox.Config {
	cfg.Store = own.Wrap(cfg.Store, own.Options{Hook: hook})
	return cfg
}

// armedConsumer is consumer with a crash hook (armed).
func (b *bundle) armedConsumer(t *testing.T, hook fault.Hook) *seqbox.Consumer {
	t.Helper()
	c, err := seqbox.NewConsumer(armed(b.cfg, hook))
	require.NoError(t, err)
	return c
}

// effects counts the record handler's effect rows for an identity ("" for
// all of the consumer's).
func (b *bundle) effects(t *testing.T, id string) int {
	t.Helper()
	var n int
	require.NoError(t, b.store.DB().QueryRow(`SELECT COUNT(*) FROM seqbox_record_effects WHERE consumer = $1 AND ($2 = '' OR id = $2)`,
		b.cfg.Name, id).Scan(&n))
	return n
}

// inboxRows counts the consumer's inbox identities.
func (b *bundle) inboxRows(t *testing.T) int64 {
	t.Helper()
	c, err := b.store.Executor().Counts(context.Background(), b.cfg.Name)
	require.NoError(t, err)
	return c.InboxRows
}
