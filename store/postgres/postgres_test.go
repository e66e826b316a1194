package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/storetest"
	"github.com/stretchr/testify/require"
)

func open(t *testing.T) store.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Exercise(t, open)
}

func TestForeignSchemaIsRefusedUntouched(t *testing.T) {
	u := pgtest.URL(t)
	db, err := sql.Open("pgx", u)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE orders (id INT PRIMARY KEY)`)
	require.NoError(t, err)
	_, err = postgres.Open(context.Background(), u)
	require.ErrorIs(t, err, store.ErrForeignDatabase)
	require.Contains(t, err.Error(), "orders")
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&n))
	require.Equal(t, 1, n, "nothing may be created in a foreign schema")
}

func TestNewerSchemaIsRefused(t *testing.T) {
	u := pgtest.URL(t)
	s, err := postgres.Open(context.Background(), u)
	require.NoError(t, err)
	_, err = s.DB().Exec(`UPDATE seqbox_meta SET value = '999' WHERE name = 'schema_version'`)
	require.NoError(t, err)
	s.Close()
	_, err = postgres.Open(context.Background(), u)
	require.ErrorIs(t, err, store.ErrSchemaTooNew)
	require.Contains(t, err.Error(), "999")
}

func TestUnreachableServerNamesHostAndCause(t *testing.T) {
	_, err := postgres.Open(context.Background(), "postgres://u:secret@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	require.Error(t, err)
	require.Contains(t, err.Error(), "127.0.0.1:1")
	require.Contains(t, err.Error(), "unreachable")
	require.NotContains(t, err.Error(), "secret")
	require.False(t, errors.Is(err, store.ErrForeignDatabase))
}

func TestReopenAndConcurrentMigration(t *testing.T) {
	u := pgtest.URL(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := postgres.Open(context.Background(), u)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
}
