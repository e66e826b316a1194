// Package sqlstore implements store.Store over database/sql. The SQL is
// written once, with $n placeholders, for every dialect seqbox supports;
// a Dialect supplies only what differs (column types, table listing).
package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox/store"
)

// Dialect is what differs between databases.
type Dialect struct {
	// Name is "sqlite" or "postgres", for error messages.
	Name string
	// Serial is the column type of an auto-increment primary key.
	Serial string
	// Blob is the column type of raw bytes.
	Blob string
	// ListTables is a query returning the names of the user tables.
	ListTables string
	// LockRow is appended to the pipeline's read of a key so that
	// transactions on one key serialize (" FOR UPDATE" on PostgreSQL;
	// empty on SQLite, where the write lock is taken at BEGIN).
	LockRow string
	// MigrationLock, when set, runs first in the migration transaction so
	// that processes opening one database at once migrate one at a time.
	MigrationLock string
}

// Store is a store.Store over a database/sql pool.
type Store struct {
	db      *sql.DB
	dialect Dialect
}

const metaTable = "seqbox_meta"

// MetaTable creates the table that marks a database as seqbox's and holds
// its schema version.
const MetaTable = `CREATE TABLE IF NOT EXISTS seqbox_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)`

// Open checks that db is empty or seqbox's, runs pending migrations and
// returns the store. A database with foreign tables and no seqbox_meta is
// refused with store.ErrForeignDatabase and left untouched.
func Open(ctx context.Context, db *sql.DB, d Dialect, where string) (*Store, error) {
	s := &Store{db: db, dialect: d}
	if err := s.migrate(ctx, where); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context, where string) error {
	tables, err := s.tables(ctx)
	if err != nil {
		return fmt.Errorf("%s: cannot read schema of %s: %w", s.dialect.Name, where, err)
	}
	if len(tables) > 0 && !tables[metaTable] {
		names := make([]string, 0, len(tables))
		for n := range tables {
			names = append(names, n)
		}
		if len(names) > 3 {
			names = append(names[:3], "…")
		}
		return fmt.Errorf("%w: %s has tables (%s) and no %s table; refusing to touch it",
			store.ErrForeignDatabase, where, strings.Join(names, ", "), metaTable)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin migration on %s: %w", s.dialect.Name, where, err)
	}
	defer tx.Rollback() //nolint:errcheck // after commit this is a no-op
	if s.dialect.MigrationLock != "" {
		if _, err := tx.ExecContext(ctx, s.dialect.MigrationLock); err != nil {
			return fmt.Errorf("%s: lock for migration: %w", s.dialect.Name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, MetaTable); err != nil {
		return fmt.Errorf("%s: create %s: %w", s.dialect.Name, metaTable, err)
	}
	var current int
	var v string
	switch err := tx.QueryRowContext(ctx, `SELECT value FROM seqbox_meta WHERE name = 'schema_version'`).Scan(&v); err {
	case nil:
		if current, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("%s: %s: schema_version %q is not a number", s.dialect.Name, where, v)
		}
	case sql.ErrNoRows:
	default:
		return fmt.Errorf("%s: read schema_version: %w", s.dialect.Name, err)
	}
	if current > len(migrations) {
		return fmt.Errorf("%w: %s is at schema version %d, this seqbox knows %d; upgrade seqbox",
			store.ErrSchemaTooNew, where, current, len(migrations))
	}
	for i := current; i < len(migrations); i++ {
		stmt := strings.NewReplacer("{{SERIAL}}", s.dialect.Serial, "{{BLOB}}", s.dialect.Blob).Replace(migrations[i])
		for _, part := range strings.Split(stmt, ";") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			if _, err := tx.ExecContext(ctx, part); err != nil {
				return fmt.Errorf("%s: migration %d: %w", s.dialect.Name, i+1, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO seqbox_meta (name, value) VALUES ('schema_version', $1)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, strconv.Itoa(len(migrations))); err != nil {
		return fmt.Errorf("%s: record schema_version: %w", s.dialect.Name, err)
	}
	return tx.Commit()
}

func (s *Store) tables(ctx context.Context) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, s.dialect.ListTables)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out[n] = true
	}
	return out, rows.Err()
}

// Begin opens a batch transaction.
func (s *Store) Begin(ctx context.Context) (store.Tx, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: begin: %w", s.dialect.Name, err)
	}
	return &Tx{tx: tx, lockRow: s.dialect.LockRow}, nil
}

// Operator returns the operator queries.
func (s *Store) Operator() store.Operator { return operator{db: s.db} }

// DB returns the pool.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the pool.
func (s *Store) Close() error { return s.db.Close() }

// micros converts a time to the stored representation.
func micros(t time.Time) int64 { return t.UnixMicro() }

func optMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func zeroNullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

func optInt(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func ptrInt(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	x := v.Int64
	return &x
}
