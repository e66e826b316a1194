// Package pgdb opens PostgreSQL pools the way every seqbox component does,
// through pgx's database/sql driver.
//
// seqbox keeps its objects in a schema of its own ("seqbox" unless
// configured) and uses unqualified names (seqbox_inbox, seqbox_queue, …),
// while the application's handler runs its own unqualified SQL in the same
// transaction. So every connection of a pool keeps the application's
// search_path (from the URL, the role or the server) and gets seqbox's
// schema appended at its end: the application's unqualified CREATE TABLE
// still lands in its own schema, and seqbox's names resolve to seqbox's
// schema. seqbox's DDL runs in a transaction whose search_path is its
// schema alone (EnterSchema).
package pgdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// DefaultSchema is the schema seqbox keeps its objects in.
const DefaultSchema = "seqbox"

// SchemaParam is the URL query parameter that names seqbox's schema
// (postgres://host/db?seqbox_schema=name). seqbox removes it from the URL
// before connecting.
const SchemaParam = "seqbox_schema"

// IsURL reports whether s names a PostgreSQL database.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// ValidSchema checks that name is a plain PostgreSQL identifier seqbox can
// use as its schema: lower-case letters, digits and underscores, not
// starting with a digit, at most 63 bytes, and not reserved (pg_…).
func ValidSchema(name string) error {
	switch {
	case !identRE.MatchString(name) || len(name) > 63:
		return fmt.Errorf("postgres: schema %q is not a plain identifier (lower-case letters, digits and _, not starting with a digit, at most 63 bytes)", name)
	case strings.HasPrefix(name, "pg_") || name == "information_schema":
		return fmt.Errorf("postgres: schema %q is reserved by PostgreSQL", name)
	}
	return nil
}

// Target is a database URL resolved for opening.
type Target struct {
	// URL is the URL to connect to, without the seqbox_schema parameter.
	URL string
	// Schema is seqbox's schema.
	Schema string
	// Where names the database and schema for messages, without the
	// password.
	Where string
}

// Locate resolves rawURL and seqbox's schema: schema when not empty,
// otherwise the URL's seqbox_schema parameter, otherwise DefaultSchema.
// Both given and different is an error.
func Locate(rawURL, schema string) (Target, error) {
	conn, fromURL, err := stripSchemaParam(rawURL)
	if err != nil {
		return Target{}, err
	}
	switch {
	case schema != "" && fromURL != "" && schema != fromURL:
		return Target{}, fmt.Errorf("postgres: schema %q given, but the URL says %s=%s", schema, SchemaParam, fromURL)
	case schema == "":
		schema = fromURL
	}
	if schema == "" {
		schema = DefaultSchema
	}
	if err := ValidSchema(schema); err != nil {
		return Target{}, err
	}
	return Target{URL: conn, Schema: schema, Where: Redact(conn) + " (schema " + schema + ")"}, nil
}

// SchemaOf returns the schema seqbox keeps its objects in for rawURL.
func SchemaOf(rawURL string) (string, error) {
	t, err := Locate(rawURL, "")
	return t.Schema, err
}

// stripSchemaParam removes the seqbox_schema parameter from the URL's
// query, textually (a multi-host URL is not a valid net/url URL).
func stripSchemaParam(rawURL string) (conn, schema string, err error) {
	base, query, ok := strings.Cut(rawURL, "?")
	if !ok {
		return rawURL, "", nil
	}
	var keep []string
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == SchemaParam {
			// Given twice, the last one counts: a URL that names a
			// schema and has another appended (a harness's, a script's)
			// means the appended one.
			if schema, err = url.QueryUnescape(v); err != nil {
				return "", "", fmt.Errorf("postgres: bad %s parameter: %w", SchemaParam, err)
			}
			if schema == "" {
				return "", "", fmt.Errorf("postgres: %s is empty in the URL (leave it out for the default schema, %s)", SchemaParam, DefaultSchema)
			}
			continue
		}
		keep = append(keep, kv)
	}
	if len(keep) == 0 {
		return base, schema, nil
	}
	return base + "?" + strings.Join(keep, "&"), schema, nil
}

// Open opens a pool to the database at rawURL (seqbox's schema from its
// seqbox_schema parameter, or DefaultSchema, appended to every
// connection's search_path) and checks that it answers. An unreachable
// server gives an error naming the host and the cause.
func Open(ctx context.Context, rawURL string) (*sql.DB, error) {
	return OpenWith(ctx, rawURL, nil)
}

// OpenWith is Open with run-time parameters set on every connection of the
// pool (a pool that runs only the embedded queue's statements tunes its
// planner this way).
func OpenWith(ctx context.Context, rawURL string, params map[string]string) (*sql.DB, error) {
	t, err := Locate(rawURL, "")
	if err != nil {
		return nil, err
	}
	return openTarget(ctx, t, params)
}

// OpenTarget opens a pool to t. Every connection's search_path is the
// application's with t.Schema appended. With readOnly, every transaction
// is read-only (default_transaction_read_only=on).
func OpenTarget(ctx context.Context, t Target, readOnly bool) (*sql.DB, error) {
	if readOnly {
		return openTarget(ctx, t, map[string]string{"default_transaction_read_only": "on"})
	}
	return openTarget(ctx, t, nil)
}

func openTarget(ctx context.Context, t Target, params map[string]string) (*sql.DB, error) {
	host := "?"
	if u, err := url.Parse(t.URL); err == nil {
		host = u.Host
	}
	cfg, err := pgx.ParseConfig(t.URL)
	if err != nil {
		return nil, fmt.Errorf("postgres %s: %w", host, err)
	}
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	if _, set := cfg.RuntimeParams[idleInTransaction]; !set {
		cfg.RuntimeParams[idleInTransaction] = IdleInTransactionTimeout
	}
	// The embedded queue's triggers need it (transport/embedded's
	// heads.go), whatever the server's default; a URL that names another
	// level gets their error instead.
	if _, set := cfg.RuntimeParams["default_transaction_isolation"]; !set {
		cfg.RuntimeParams["default_transaction_isolation"] = "read committed"
	}
	schema := QuoteIdent(t.Schema)
	db := stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SELECT pg_catalog.set_config('search_path',
			CASE WHEN pg_catalog.current_setting('search_path') = '' THEN $1
			ELSE pg_catalog.current_setting('search_path') || ', ' || $1 END, false)`, schema)
		return err
	}))
	// Keep as many idle as may be open: database/sql keeps two by
	// default, so a burst of a few workers, the queue's receive and its
	// acks closed the connections it had just opened, and each new one
	// cost a backend start, the search_path statement above and a prepare
	// of every statement again (pgx caches them per connection). Idle
	// ones still close after a minute.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
			// The server answered: a database or role that does not
			// exist, a setting it does not know.
			return nil, fmt.Errorf("postgres %s refused the connection: %w", host, err)
		}
		return nil, fmt.Errorf("postgres %s is unreachable: %w", host, err)
	}
	return db, nil
}

// IdleInTransactionTimeout is idle_in_transaction_session_timeout on
// seqbox's connections, unless the URL names it
// (?idle_in_transaction_session_timeout=…): the server ends a
// transaction that waited this long for its client between statements.
// seqbox's own transactions never wait on the network (no call inside a
// transaction); a process frozen inside one (SIGSTOP, a stalled VM)
// would otherwise hold its key's locks, and every other process's work on
// that key, for as long as it stays frozen. Five minutes leaves room for
// a Handler's own long work inside its transaction.
const IdleInTransactionTimeout = "5min"

const idleInTransaction = "idle_in_transaction_session_timeout"

// QuoteIdent quotes a PostgreSQL identifier.
func QuoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// EnterSchema prepares a migration transaction: it creates schema if it
// does not exist and makes it the transaction's only search_path (SET
// LOCAL), so that unqualified CREATE TABLE lands in it. Callers serialize
// migrations with an advisory lock first.
func EnterSchema(ctx context.Context, tx *sql.Tx, schema string) error {
	if err := ValidSchema(schema); err != nil {
		return err
	}
	// Look first: CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege
	// on the database even when the schema exists, and a role that only
	// got a schema prepared by its DBA does not have it.
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return fmt.Errorf("look for schema %s: %w", schema, err)
	}
	if !exists {
		if _, err := tx.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS `+QuoteIdent(schema)); err != nil {
			return fmt.Errorf("create schema %s: %w", schema, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `SET LOCAL search_path TO `+QuoteIdent(schema)); err != nil {
		return fmt.Errorf("set search_path to %s: %w", schema, err)
	}
	return nil
}

// Querier is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// CheckLayout refuses a connection on which seqbox's unqualified names
// would not reach schema: a relation named seqbox_… in another schema of
// the search_path hides seqbox's own (an older seqbox kept its tables in
// the connection's current schema). It only reads.
func CheckLayout(ctx context.Context, q Querier, schema string) error {
	rows, err := q.QueryContext(ctx, `SELECT n.nspname, c.relname
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relname LIKE 'seqbox\_%' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
		  AND n.nspname <> $1 AND n.nspname = ANY (pg_catalog.current_schemas(false))
		ORDER BY n.nspname, c.relname`, schema)
	if err != nil {
		return fmt.Errorf("postgres: read the search_path's schemas: %w", err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var ns, rel string
		if err := rows.Scan(&ns, &rel); err != nil {
			return err
		}
		found = append(found, ns+"."+rel)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(found) == 0 {
		return nil
	}
	other := strings.SplitN(found[0], ".", 2)[0]
	if len(found) > 3 {
		found = append(found[:3:3], fmt.Sprintf("… (%d more)", len(found)-3))
	}
	return fmt.Errorf("postgres: %s on the search_path would hide seqbox's tables in schema %s "+
		"(an older seqbox kept its tables in the connection's schema): keep using them with schema %s "+
		"(the Schema option, or ?%s=%s in the URL), or move them into schema %s (ALTER TABLE %s.seqbox_… SET SCHEMA %s)",
		strings.Join(found, ", "), schema, other, SchemaParam, other, schema, other, schema)
}

// QuoteLiteral quotes s as a PostgreSQL string literal
// (standard_conforming_strings, the default since 9.1).
func QuoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// QueueFunctions are the trigger functions the embedded queue keeps in
// seqbox's schema (transport/embedded's heads.go), seqbox's own.
var QueueFunctions = []string{"seqbox_queue_behind_insert", "seqbox_queue_behind_delete"}

// queueGroupLockClass is the first key of an embedded queue group's
// advisory lock (the two-key form, a key space apart from the
// single-key locks of internal/dialect).
const queueGroupLockClass = 7357213

// QueueGroupLock is the SQL call that takes the transaction-level lock
// of the embedded queue's group g of queue q (SQL expressions). Two
// groups whose keys collide only share a lock.
func QueueGroupLock(q, g string) string {
	return fmt.Sprintf(`pg_advisory_xact_lock(%d, %s)`, queueGroupLockClass, QueueGroupKey(q, g))
}

// QueueGroupKey is the key of group g of queue q (SQL expressions) in
// its lock, for LockQueueGroupKeys' subquery.
func QueueGroupKey(q, g string) string { return `hashtext(` + q + ` || ' ' || ` + g + `)` }

// LockQueueGroups is a statement that takes, in key order, the group
// locks (QueueGroupLock) of the rows of seqbox_queue that where selects
// (a condition on its columns), and returns one row (a column n): a
// statement's first step, in a WITH, before any of its rows takes its
// group's lock in the rows' order.
func LockQueueGroups(where string) string {
	return LockQueueGroupKeys(`SELECT ` + QueueGroupKey("queue", "msg_group") + ` AS k FROM seqbox_queue WHERE msg_group <> '' AND (` + where + `)`)
}

// LockQueueGroupKeys is LockQueueGroups for groups named by a subquery
// of their keys (a column k of QueueGroupKey's).
func LockQueueGroupKeys(keys string) string {
	return fmt.Sprintf(`SELECT count(pg_advisory_xact_lock(%d, s.k)) AS n FROM (SELECT DISTINCT k FROM (%s) d ORDER BY k) s`, queueGroupLockClass, keys)
}

// Foreign lists, for an exclusive open, what the database holds that is
// not seqbox's: in schema, every relation, type or function whose name
// does not start with seqbox_, every function but the embedded queue's,
// and every trigger but the queue's own on seqbox_queue (seqbox creates
// tables, their indexes and sequences, and those functions and
// triggers); and in the connection's current schema (usually public,
// the application's), everything. A trigger counts wherever its function
// lives: one on a seqbox table runs with seqbox's writes. Objects that
// belong to an extension are not counted.
func Foreign(ctx context.Context, q Querier, schema string) ([]string, error) {
	rows, err := q.QueryContext(ctx, `WITH ns AS (
			SELECT oid, nspname FROM pg_catalog.pg_namespace
			WHERE nspname = $1 OR nspname = pg_catalog.current_schema()),
		ext AS (SELECT classid, objid FROM pg_catalog.pg_depend WHERE deptype = 'e')
		SELECT ns.nspname, c.relname,
			CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'v' THEN 'view'
				WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'foreign table'
				ELSE 'type' END
		FROM pg_catalog.pg_class c JOIN ns ON ns.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f', 'c')
		  AND NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_catalog.pg_class'::regclass AND ext.objid = c.oid)
		UNION ALL
		SELECT ns.nspname, p.proname, 'function'
		FROM pg_catalog.pg_proc p JOIN ns ON ns.oid = p.pronamespace
		WHERE NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_catalog.pg_proc'::regclass AND ext.objid = p.oid)
		UNION ALL
		SELECT ns.nspname, c.relname || '.' || g.tgname, 'trigger'
		FROM pg_catalog.pg_trigger g JOIN pg_catalog.pg_class c ON c.oid = g.tgrelid JOIN ns ON ns.oid = c.relnamespace
		WHERE NOT g.tgisinternal
		  AND NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_catalog.pg_trigger'::regclass AND ext.objid = g.oid)
		UNION ALL
		SELECT ns.nspname, t.typname, 'type'
		FROM pg_catalog.pg_type t JOIN ns ON ns.oid = t.typnamespace
		WHERE t.typtype IN ('d', 'e', 'r')
		  AND NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_catalog.pg_type'::regclass AND ext.objid = t.oid)
		ORDER BY 1, 2`, schema)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var ns, name, kind string
		if err := rows.Scan(&ns, &name, &kind); err != nil {
			return nil, err
		}
		if ns == schema && strings.HasPrefix(name, "seqbox_") && (kind == "table" || kind == "sequence") {
			continue
		}
		if ns == schema && kind == "function" && slices.Contains(QueueFunctions, name) {
			continue
		}
		if ns == schema && kind == "trigger" && isQueueTrigger(name) {
			continue
		}
		out = append(out, kind+" "+ns+"."+name)
	}
	return out, rows.Err()
}

// isQueueTrigger reports whether name (table.trigger) is one of the
// embedded queue's triggers on its table: each is named after its
// function (QueueFunctions).
func isQueueTrigger(name string) bool {
	table, trigger, _ := strings.Cut(name, ".")
	return table == "seqbox_queue" && slices.Contains(QueueFunctions, trigger)
}

// Redact hides the password in a database URL, for messages.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

// Location names the database and schema t reaches, the same for every
// spelling of its URL (password and connection options aside): two
// components with one location share their tables.
func (t Target) Location() string {
	cfg, err := pgconn.ParseConfig(t.URL)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("postgres://%s:%d/%s#%s", cfg.Host, cfg.Port, cfg.Database, t.Schema)
}
