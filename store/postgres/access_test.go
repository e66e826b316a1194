package postgres_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/stretchr/testify/require"
)

// freshDatabase creates a database of this test's own (its public schema
// empty, as in a new application's database), dropped when the test ends,
// and returns its URL.
func freshDatabase(t *testing.T) string {
	t.Helper()
	base := pgtest.BaseURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "seqbox_t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	require.NoError(t, err)
	_, err = admin.Exec(`CREATE DATABASE ` + name)
	require.NoError(t, err, "the tests need to create databases (CREATEDB) on the server")
	t.Cleanup(func() {
		_, _ = admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
		admin.Close()
	})
	u, err := url.Parse(base)
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}

func rawDB(t *testing.T, u string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", u)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		_, err := db.Exec(s)
		require.NoError(t, err, s)
	}
}

// appObjects is an application's database: a table with rows, a view, a
// sequence, a function and a type in public.
var appObjects = []string{
	`CREATE TABLE crm_tasks (id SERIAL PRIMARY KEY, title TEXT NOT NULL)`,
	`INSERT INTO crm_tasks (title) VALUES ('call Acme'), ('send proposal')`,
	`CREATE VIEW open_tasks AS SELECT * FROM crm_tasks`,
	`CREATE SEQUENCE invoice_numbers START 1000`,
	`CREATE FUNCTION task_count() RETURNS bigint LANGUAGE sql AS 'SELECT count(*) FROM crm_tasks'`,
	`CREATE TYPE task_state AS ENUM ('open', 'done')`,
}

// listing is the catalog of a database as an application sees it: its
// schemas, and every object of every schema but seqbox's with its
// definition, and the rows of public.crm_tasks.
func listing(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`
		SELECT 'schema ' || nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema'
		UNION ALL
		SELECT n.nspname || '.' || c.relname || ' ' || c.relkind::text || ' ' ||
			COALESCE((SELECT string_agg(a.attname || ':' || format_type(a.atttypid, a.atttypmod), ',' ORDER BY a.attnum)
				FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'
		UNION ALL
		SELECT n.nspname || '.' || p.proname || '() ' || p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
		UNION ALL
		SELECT n.nspname || '.' || t.typname || ' type ' || t.typtype::text FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = 'public'
		UNION ALL
		SELECT 'row ' || id || ':' || title FROM public.crm_tasks WHERE to_regclass('public.crm_tasks') IS NOT NULL
		UNION ALL
		SELECT 'invoice_numbers ' || last_value || ' ' || is_called FROM public.invoice_numbers WHERE to_regclass('public.invoice_numbers') IS NOT NULL
		ORDER BY 1`)
	if err != nil && strings.Contains(err.Error(), "does not exist") {
		// The database has no crm_tasks or no invoice_numbers.
		rows, err = db.Query(`
			SELECT 'schema ' || nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema'
			UNION ALL
			SELECT n.nspname || '.' || c.relname || ' ' || c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'
			UNION ALL
			SELECT n.nspname || '.' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
			ORDER BY 1`)
	}
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

func schemaTables(t *testing.T, db *sql.DB, schema string) []string {
	t.Helper()
	rows, err := db.Query(`SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY 1`, schema)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	return out
}

func schemaExists(t *testing.T, db *sql.DB, schema string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, db.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&ok))
	return ok
}

func deliver(t *testing.T, st store.Store, id string, h seqbox.Handler) seqboxtype.Outcome {
	t.Helper()
	c, err := seqbox.NewConsumer(seqbox.Config{Name: "crm", Store: st, Handler: h})
	require.NoError(t, err)
	results, err := c.Deliver(context.Background(),
		[]byte(`{"specversion":"1.0","id":"`+id+`","source":"crm","type":"followup","partitionkey":"opp-1"}`), 1)
	require.NoError(t, err)
	return results[0].Outcome
}

// The application's own database is adopted: seqbox's tables go to schema
// seqbox, nothing in public changes, and the handler's unqualified SQL
// reaches public in the inbox's transaction.
func TestAdoptApplicationDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := freshDatabase(t)
	db := rawDB(t, u)
	exec(t, db, appObjects...)
	before := listing(t, db)

	st, err := postgres.Open(ctx, u)
	require.NoError(t, err)
	defer st.Close()

	after := listing(t, db)
	require.Equal(t, append(append([]string{}, before...), "schema seqbox"), sortedWith(before, "schema seqbox"))
	require.Equal(t, sortedWith(before, "schema seqbox"), after, "public is as it was; only schema seqbox is new")
	tables := schemaTables(t, db, "seqbox")
	require.Contains(t, tables, "seqbox_meta")
	require.Contains(t, tables, "seqbox_inbox")
	require.Empty(t, schemaTablesLike(t, db, "public", "seqbox_"))

	// Every pooled connection: the application's search_path, then seqbox.
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		c, err := st.DB().Conn(ctx)
		require.NoError(t, err)
		defer c.Close()
		conns[i] = c
	}
	for _, c := range conns {
		var path string
		require.NoError(t, c.QueryRowContext(ctx, `SHOW search_path`).Scan(&path))
		require.Equal(t, `"$user", public, "seqbox"`, path)
	}
	for _, c := range conns {
		c.Close()
	}

	// A handler's unqualified DDL and DML land in public.
	_, err = st.DB().Exec(`CREATE TABLE crm_tasks2 (id INT)`)
	require.NoError(t, err)
	var where string
	require.NoError(t, db.QueryRow(`SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'crm_tasks2'`).Scan(&where))
	require.Equal(t, "public", where)

	h := func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO crm_tasks (title) VALUES ($1)`, "follow up "+ev.PartitionKey)
		return err
	}
	require.Equal(t, seqboxtype.Applied, deliver(t, st, "evt-1", h))
	require.Equal(t, seqboxtype.Duplicate, deliver(t, st, "evt-1", h))
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM public.crm_tasks`).Scan(&n))
	require.Equal(t, 3, n)
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM seqbox.seqbox_inbox`).Scan(&n))
	require.Equal(t, 1, n)

	// Reopening migrates nothing and still touches nothing of public's.
	st2, err := postgres.Open(ctx, u)
	require.NoError(t, err)
	require.NoError(t, st2.Close())
}

func sortedWith(list []string, extra string) []string {
	out := append([]string{}, list...)
	out = append(out, extra)
	for i := len(out) - 1; i > 0 && out[i] < out[i-1]; i-- {
		out[i], out[i-1] = out[i-1], out[i]
	}
	return out
}

func schemaTablesLike(t *testing.T, db *sql.DB, schema, prefix string) []string {
	var out []string
	for _, n := range schemaTables(t, db, schema) {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// The CLI's creating commands refuse an application's database, adopted
// or not, and create nothing in it.
func TestExclusiveRefusesApplicationDatabaseUntouched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := freshDatabase(t)
	db := rawDB(t, u)
	exec(t, db, appObjects...)
	before := listing(t, db)

	_, err := postgres.OpenWith(ctx, u, postgres.Options{Access: store.Exclusive})
	require.ErrorIs(t, err, store.ErrForeignDatabase)
	require.Contains(t, err.Error(), "public.crm_tasks", "the error names what was found")
	require.Contains(t, err.Error(), "schema seqbox")
	require.Equal(t, before, listing(t, db))
	require.False(t, schemaExists(t, db, "seqbox"), "no schema is created")

	st, err := postgres.Open(ctx, u)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	_, err = postgres.OpenWith(ctx, u, postgres.Options{Access: store.Exclusive})
	require.ErrorIs(t, err, store.ErrForeignDatabase)
	require.Contains(t, err.Error(), "adopted")
}

// Exclusive holes: anything an application may keep, alone, makes a
// database the application's; in its current schema or in seqbox's.
func TestExclusiveRefusesAnyApplicationObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct{ kind, stmt, found string }{
		{"table", `CREATE TABLE orders (id INT)`, "table %s.orders"},
		{"view", `CREATE VIEW answer AS SELECT 42 AS n`, "view %s.answer"},
		{"sequence", `CREATE SEQUENCE numbers`, "sequence %s.numbers"},
		{"function", `CREATE FUNCTION one() RETURNS int LANGUAGE sql AS 'SELECT 1'`, "function %s.one"},
		{"enum type", `CREATE TYPE mood AS ENUM ('ok')`, "type %s.mood"},
		{"view named like seqbox's", `CREATE VIEW seqbox_inbox AS SELECT 1 AS n`, "view %s.seqbox_inbox"},
	} {
		t.Run(c.kind+" in the application's schema", func(t *testing.T) {
			t.Parallel()
			u := freshDatabase(t)
			db := rawDB(t, u)
			exec(t, db, c.stmt)
			before := listing(t, db)
			_, err := postgres.OpenWith(ctx, u, postgres.Options{Access: store.Exclusive})
			if strings.Contains(c.stmt, "seqbox_") {
				// Refused as a layout seqbox cannot use in any mode: it would
				// hide seqbox's own table.
				require.ErrorContains(t, err, "public.seqbox_inbox on the search_path would hide")
			} else {
				require.ErrorIs(t, err, store.ErrForeignDatabase)
				require.Contains(t, err.Error(), fmt.Sprintf(c.found, "public"))
			}
			require.Equal(t, before, listing(t, db))
			require.False(t, schemaExists(t, db, "seqbox"))
		})
		t.Run(c.kind+" in seqbox's schema", func(t *testing.T) {
			t.Parallel()
			u, schema := schemaURL(t) // the schema is both the connection's and seqbox's
			db := rawDB(t, pgtestURLOf(t, u))
			exec(t, db, c.stmt)
			before := schemaTables(t, db, schema)
			_, err := postgres.OpenWith(ctx, u, postgres.Options{Access: store.Exclusive})
			require.ErrorIs(t, err, store.ErrForeignDatabase)
			require.Contains(t, err.Error(), fmt.Sprintf(c.found, schema))
			require.Equal(t, before, schemaTables(t, db, schema))
		})
	}
}

// What an exclusive open accepts: a new database, and one that is seqbox's
// with its built-in handlers' tables in the application's schema.
func TestExclusiveAcceptsNewAndSeqboxDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := freshDatabase(t)
	db := rawDB(t, u)
	st, err := postgres.OpenWith(ctx, u, postgres.Options{Access: store.Exclusive})
	require.NoError(t, err)
	_, err = st.DB().Exec(`CREATE TABLE record_effects (consumer TEXT)`) // as an older record handler did, in the connection's schema
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.Equal(t, []string{"record_effects"}, schemaTables(t, db, "public"))

	st, err = postgres.OpenWith(ctx, u, postgres.Options{Access: store.Exclusive})
	require.NoError(t, err)
	require.NoError(t, st.Close())

	t.Run("extensions' objects are not the application's", func(t *testing.T) {
		u := freshDatabase(t)
		db := rawDB(t, u)
		if _, err := db.Exec(`CREATE EXTENSION pgcrypto`); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CREATE EXTENSION pgcrypto: %v", err)
			}
			t.Skipf("pgcrypto is not installed on this server: %v", err)
		}
		st, err := postgres.OpenWith(ctx, u, postgres.Options{Access: store.Exclusive})
		require.NoError(t, err)
		require.NoError(t, st.Close())
	})
}

func TestReadOnlyPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ro := postgres.Options{Access: store.ReadOnly}

	t.Run("application database without seqbox", func(t *testing.T) {
		u := freshDatabase(t)
		db := rawDB(t, u)
		exec(t, db, appObjects...)
		before := listing(t, db)
		_, err := postgres.OpenWith(ctx, u, ro)
		require.ErrorContains(t, err, "(schema seqbox) holds no seqbox data (no seqbox_meta)")
		require.Equal(t, before, listing(t, db))
		require.False(t, schemaExists(t, db, "seqbox"))
	})

	t.Run("adopted database", func(t *testing.T) {
		u := freshDatabase(t)
		db := rawDB(t, u)
		exec(t, db, appObjects...)
		w, err := postgres.Open(ctx, u)
		require.NoError(t, err)
		require.Equal(t, seqboxtype.Applied, deliver(t, w, "evt-1", func(context.Context, seqbox.Tx, seqboxtype.Event) error { return nil }))
		require.NoError(t, w.Close())
		before := listing(t, db)
		var inboxBefore int
		require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM seqbox.seqbox_inbox`).Scan(&inboxBefore))

		st, err := postgres.OpenWith(ctx, u, ro)
		require.NoError(t, err)
		defer st.Close()
		counts, err := st.Executor().Counts(ctx, "crm")
		require.NoError(t, err)
		require.Equal(t, int64(1), counts.InboxRows)
		_, err = st.DB().Exec(`INSERT INTO crm_tasks (title) VALUES ('x')`)
		require.ErrorContains(t, err, "read-only transaction")
		_, err = st.DB().Exec(`DELETE FROM seqbox_inbox`)
		require.ErrorContains(t, err, "read-only transaction")
		tx, err := st.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.InboxInsert(ctx, store.InboxRow{Consumer: "crm", Source: "s", ID: "x", Outcome: "applied"})
		require.Error(t, err)
		require.NoError(t, tx.Rollback())
		require.Equal(t, before, listing(t, db))
		var inbox int
		require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM seqbox.seqbox_inbox`).Scan(&inbox))
		require.Equal(t, inboxBefore, inbox)
	})

	t.Run("missing schema", func(t *testing.T) {
		u, _ := schemaURL(t)
		_, err := postgres.OpenWith(ctx, pgtestURLOf(t, u), postgres.Options{Access: store.ReadOnly, Schema: "nothing_here"})
		require.ErrorContains(t, err, "(schema nothing_here) holds no seqbox data (no seqbox_meta)")
	})
}

// An older seqbox kept its tables in the connection's schema; they would
// hide the tables in schema seqbox. Refused, with the way out.
func TestOldLayoutIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := freshDatabase(t)
	db := rawDB(t, u)
	old, err := postgres.OpenWith(ctx, u, postgres.Options{Schema: "public"})
	require.NoError(t, err)
	require.NoError(t, old.Close())
	for _, access := range []store.Access{store.Adopt, store.Exclusive, store.ReadOnly} {
		_, err := postgres.OpenWith(ctx, u, postgres.Options{Access: access})
		require.ErrorContains(t, err, "public.seqbox_")
		require.ErrorContains(t, err, "seqbox_schema=public")
		require.False(t, schemaExists(t, db, "seqbox"), access.String())
	}
	st, err := postgres.OpenWith(ctx, u+"&seqbox_schema=public", postgres.Options{Access: store.ReadOnly})
	require.NoError(t, err)
	require.NoError(t, st.Close())
}

func TestSchemaOption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, schema := schemaURL(t)
	for _, bad := range []string{"Seqbox", "1abc", "a-b", `a"b`, "pg_seqbox", strings.Repeat("a", 64), "a b"} {
		_, err := postgres.OpenWith(ctx, u, postgres.Options{Schema: bad})
		require.ErrorContains(t, err, "schema", bad)
	}
	_, err := postgres.OpenWith(ctx, u, postgres.Options{Schema: "other"})
	require.ErrorContains(t, err, "seqbox_schema="+schema)

	st, err := postgres.OpenWith(ctx, pgtestURLOf(t, u), postgres.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, st.Close())
}

// A role that may not create schemas adopts a schema its DBA prepared.
func TestAdoptPreparedSchemaWithoutCreatePrivilege(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := freshDatabase(t)
	admin := rawDB(t, u)
	var b [4]byte
	_, _ = rand.Read(b[:])
	role := "seqbox_app_" + hex.EncodeToString(b[:])
	dbName := strings.TrimPrefix(mustParse(t, u).Path, "/")
	exec(t, admin,
		`CREATE ROLE `+role+` LOGIN`,
		`REVOKE CREATE ON DATABASE `+dbName+` FROM PUBLIC`,
		`CREATE SCHEMA seqbox AUTHORIZATION `+role,
		`GRANT CREATE ON SCHEMA public TO `+role)
	t.Cleanup(func() { // runs before the database is dropped
		_, err := admin.Exec(`DROP OWNED BY ` + role)
		require.NoError(t, err)
		_, err = admin.Exec(`DROP ROLE ` + role)
		require.NoError(t, err)
	})
	appURL := mustParse(t, u)
	appURL.User = url.User(role)
	st, err := postgres.Open(ctx, appURL.String())
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.Contains(t, schemaTables(t, admin, "seqbox"), "seqbox_inbox")
}

func mustParse(t *testing.T, u string) *url.URL {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	return p
}
