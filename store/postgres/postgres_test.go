package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"testing"

	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/storetest"
	"github.com/seqbox/seqbox/transport/embedded"
	"github.com/stretchr/testify/require"
)

// schemaURL returns a URL to a fresh schema of this test's own, in which
// both the application's objects (its search_path) and seqbox's
// (seqbox_schema) live, and that schema's name.
func schemaURL(t *testing.T) (string, string) {
	t.Helper()
	u, err := url.Parse(pgtest.URL(t))
	require.NoError(t, err)
	q := u.Query()
	schema := q.Get("search_path")
	require.NotEmpty(t, schema)
	q.Set("seqbox_schema", schema)
	u.RawQuery = q.Encode()
	return u.String(), schema
}

func open(t *testing.T) store.Store {
	t.Helper()
	u, _ := schemaURL(t)
	s, err := postgres.Open(context.Background(), u)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Exercise(t, open)
}

func TestForeignSchemaIsRefusedUntouched(t *testing.T) {
	u, _ := schemaURL(t)
	db, err := sql.Open("pgx", pgtestURLOf(t, u))
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE orders (id INT PRIMARY KEY)`)
	require.NoError(t, err)
	_, err = postgres.OpenWith(context.Background(), u, postgres.Options{Access: store.Exclusive})
	require.ErrorIs(t, err, store.ErrForeignDatabase)
	require.Contains(t, err.Error(), "orders")
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&n))
	require.Equal(t, 1, n, "nothing may be created in a foreign schema")

	// The library adopts it: seqbox's tables beside the application's.
	s, err := postgres.Open(context.Background(), u)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'orders'`).Scan(&n))
	require.Equal(t, 1, n)
}

// pgtestURLOf removes seqbox's parameter from u, for the driver.
func pgtestURLOf(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	q := p.Query()
	q.Del("seqbox_schema")
	p.RawQuery = q.Encode()
	return p.String()
}

func TestNewerSchemaIsRefused(t *testing.T) {
	u, _ := schemaURL(t)
	s, err := postgres.OpenWith(context.Background(), u, postgres.Options{Access: store.Exclusive})
	require.NoError(t, err)
	_, err = s.DB().Exec(`UPDATE seqbox_meta SET value = '999' WHERE name = 'schema_version'`)
	require.NoError(t, err)
	s.Close()
	for _, access := range []store.Access{store.Adopt, store.Exclusive, store.ReadOnly} {
		_, err = postgres.OpenWith(context.Background(), u, postgres.Options{Access: access})
		require.ErrorIs(t, err, store.ErrSchemaTooNew, access.String())
		require.Contains(t, err.Error(), "999")
	}
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
	u, _ := schemaURL(t)
	fresh := freshDatabase(t) // seqbox's schema does not exist yet there
	for _, u := range []string{u, fresh} {
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
}

// A trigger an application put on one of seqbox's tables makes the
// database not seqbox's alone, whatever its function and wherever that
// lives; the embedded queue's own triggers do not.
func TestForeignTriggerOnASeqboxTableIsRefused(t *testing.T) {
	ctx := context.Background()
	u, schema := schemaURL(t)
	q, err := embedded.Open(ctx, u, embedded.Config{Name: "own-triggers"})
	require.NoError(t, err, "the queue's triggers, in seqbox's schema")
	require.NoError(t, q.Close())
	s, err := postgres.OpenWith(ctx, u, postgres.Options{Access: store.Exclusive})
	require.NoError(t, err, "the embedded queue's triggers are seqbox's")
	s.Close()

	db, err := sql.Open("pgx", pgtestURLOf(t, u))
	require.NoError(t, err)
	defer db.Close()
	other := schema + "_app"
	for _, stmt := range []string{`CREATE SCHEMA ` + other,
		`CREATE FUNCTION ` + other + `.audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$`,
		`CREATE TRIGGER audit_inbox AFTER INSERT ON seqbox_inbox FOR EACH ROW EXECUTE FUNCTION ` + other + `.audit()`} {
		_, err := db.Exec(stmt)
		require.NoError(t, err, stmt)
	}
	t.Cleanup(func() { _, _ = db.Exec(`DROP SCHEMA ` + other + ` CASCADE`) })
	_, err = postgres.OpenWith(ctx, u, postgres.Options{Access: store.Exclusive})
	require.ErrorIs(t, err, store.ErrForeignDatabase)
	require.Contains(t, err.Error(), "trigger "+schema+".seqbox_inbox.audit_inbox")
}

// A server that answers, refusing the database, is not called
// unreachable: the message says it refused, and why.
func TestARefusedConnectionIsNotUnreachable(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	require.NoError(t, err)
	u.Path = "/seqbox_no_such_database"
	_, err = postgres.Open(context.Background(), u.String())
	require.ErrorContains(t, err, "refused the connection")
	require.ErrorContains(t, err, `database "seqbox_no_such_database" does not exist`)
	require.NotContains(t, err.Error(), "unreachable")
}
