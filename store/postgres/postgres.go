// Package postgres is the seqbox store for teams that outgrow one machine:
// the inbox lives in the PostgreSQL they already run, and many consumer
// processes on many machines compete safely through its constraints (the
// unique inbox key, and a locked compare-and-set on each key's version).
//
// The database may be the application's own: the inbox must commit in the
// same transaction as the business tables. seqbox keeps its objects in a
// schema of its own ("seqbox" by default) and never touches the others.
// Each pooled connection keeps the application's search_path with seqbox's
// schema appended at its end, so the handler's unqualified SQL
// ("INSERT INTO crm_tasks …", even "CREATE TABLE …") still reaches the
// application's schema while seqbox's seqbox_… names resolve to its own.
// A pooler that does not keep session settings (PgBouncer in transaction
// mode) loses that search_path; name seqbox's schema in the role's or the
// database's search_path instead.
package postgres

import (
	"context"
	"database/sql"

	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/store"
)

// DefaultSchema is the schema seqbox keeps its objects in unless told
// otherwise.
const DefaultSchema = pgdb.DefaultSchema

// Options say how OpenWith treats the database.
type Options struct {
	// Access is what opening may do to the database; the zero value is
	// store.Adopt.
	Access store.Access
	// Schema is the schema seqbox keeps its objects in: a plain lower-case
	// identifier. Empty means the URL's seqbox_schema parameter if it has
	// one (postgres://host/db?seqbox_schema=name), else DefaultSchema.
	Schema string
}

// storeDialect is PostgreSQL's flavour of the shared SQL, for seqbox's
// objects in schema.
func storeDialect(schema string) sqlstore.Dialect {
	return sqlstore.Dialect{
		SQL:    dialect.Postgres,
		Arrays: true,
		ListTables: `SELECT c.relname FROM pg_catalog.pg_class c
			JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = '` + schema + `' AND c.relkind IN ('r', 'p')`,
		Meta:          pgdb.QuoteIdent(schema) + ".seqbox_meta",
		MigrationLock: dialect.XactLock(dialect.StoreMigrationLock),
		StorageFull:   pgdb.StorageFull,
		Check: func(ctx context.Context, q sqlstore.Querier) error {
			return pgdb.CheckLayout(ctx, q, schema)
		},
		Foreign: func(ctx context.Context, q sqlstore.Querier) ([]string, error) {
			return pgdb.Foreign(ctx, q, schema)
		},
		Enter: func(ctx context.Context, tx *sql.Tx) error {
			return pgdb.EnterSchema(ctx, tx, schema)
		},
		Schema:   schema,
		Legacy:   legacyTable,
		Pipeline: pgdb.Pipeline,
		Refused:  pgdb.Refused,
		// A send of the pool's statements waits at most this long for a
		// row lock, then its statements go alone (sqlstore's pipeGroup).
		GroupFirst: `SELECT pg_catalog.set_config('lock_timeout', '250ms', true)`,
	}
}

// legacyTable finds the table name, unqualified, reaches through q's
// search_path (before the migration transaction's EnterSchema: the
// application's search_path, then seqbox's schema), with its columns;
// nil when it reaches none, or reaches something else (a view, a
// partitioned or temporary table).
func legacyTable(ctx context.Context, q sqlstore.Querier, name string) (*sqlstore.Table, error) {
	rows, err := q.QueryContext(ctx, `SELECT n.nspname, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull,
			EXISTS (SELECT 1 FROM pg_catalog.pg_index i
				WHERE i.indrelid = c.oid AND i.indisprimary AND a.attnum = ANY (i.indkey))
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE c.oid = pg_catalog.to_regclass(pg_catalog.quote_ident($1)) AND c.relkind = 'r' AND c.relpersistence <> 't'
		ORDER BY a.attnum`, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var t *sqlstore.Table
	for rows.Next() {
		var ns string
		var c sqlstore.Column
		if err := rows.Scan(&ns, &c.Name, &c.Type, &c.NotNull, &c.PrimaryKey); err != nil {
			return nil, err
		}
		if t == nil {
			t = &sqlstore.Table{Name: pgdb.QuoteIdent(ns) + "." + pgdb.QuoteIdent(name)}
		}
		t.Columns = append(t.Columns, c)
	}
	return t, rows.Err()
}

// IsURL reports whether s names a PostgreSQL database.
func IsURL(s string) bool { return pgdb.IsURL(s) }

// Open opens the database at url with store.Adopt and creates or migrates
// seqbox's objects in its schema. It is OpenWith with the zero Options.
func Open(ctx context.Context, rawURL string) (store.Store, error) {
	return OpenWith(ctx, rawURL, Options{})
}

// OpenWith opens the database at url as opt.Access allows, with seqbox's
// objects in schema opt.Schema.
//
//   - store.Adopt (the default) creates the schema if needed and creates or
//     migrates seqbox's tables in it; no other schema is touched. The
//     database is recorded as the application's, so that later
//     store.Exclusive opens refuse it.
//   - store.Exclusive is for a database that is seqbox's alone. When
//     seqbox's schema has no seqbox_meta yet, it is refused with
//     store.ErrForeignDatabase, and nothing is created, if seqbox's schema
//     holds anything not seqbox's, or the connection's current schema
//     (current_schema(), usually public: the application's) holds any
//     table, view, sequence, function or type (extensions' objects aside).
//     A database whose seqbox_meta says it was adopted is refused too; one
//     seqbox created is accepted, whatever its built-in handlers added.
//   - store.ReadOnly writes nothing: every transaction is read-only
//     (default_transaction_read_only=on), nothing is created or migrated,
//     and seqbox's schema must hold seqbox_meta.
//
// In every mode, seqbox_… tables in another schema of the search_path
// (an older seqbox's layout) are refused, since they would hide seqbox's
// own; a database migrated by a newer seqbox is refused with
// store.ErrSchemaTooNew.
func OpenWith(ctx context.Context, rawURL string, opt Options) (store.Store, error) {
	t, err := pgdb.Locate(rawURL, opt.Schema)
	if err != nil {
		return nil, err
	}
	db, err := pgdb.OpenTarget(ctx, t, opt.Access == store.ReadOnly)
	if err != nil {
		return nil, err
	}
	s, err := sqlstore.OpenWith(ctx, db, storeDialect(t.Schema), t.Where, opt.Access)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.SetLocation(t.Location())
	return s, nil
}

// Redact hides the password in a database URL, for messages.
func Redact(rawURL string) string { return pgdb.Redact(rawURL) }
