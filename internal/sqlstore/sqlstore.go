// Package sqlstore implements store.Store over database/sql. The SQL is
// written once, with $n placeholders, for every dialect seqbox supports;
// a Dialect, which the driver that opens the store supplies, holds only
// what differs (its dialect.SQL, table listing, error classification,
// locks). The schema is the numbered files in migrations/ (schema.go).
package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seqbox/seqbox/internal/ddl"
	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/seqbox/seqbox/internal/writeturn"
	"github.com/seqbox/seqbox/store"
)

// Dialect is what differs between databases.
type Dialect struct {
	// SQL spells what differs in the SQL text: the name, the column types
	// of the migrations' placeholders, and LockRow, appended to the
	// pipeline's read of a key so that transactions on one key serialize.
	dialect.SQL
	// CacheStatements prepares the pipeline's statements once per
	// connection (for drivers that do not cache them themselves).
	CacheStatements bool
	// Arrays says the database takes a column of values as one array
	// parameter (PostgreSQL: unnest, = ANY), so that the set-based
	// operations of a batch are one statement each (arrays.go).
	Arrays bool
	// OneWriter serializes this process's batch transactions before they
	// begin (SQLite: one writer at a time anyway).
	OneWriter bool
	// Retry, when set, runs the open's migration and retries it while the
	// database is busy with another process's writes.
	Retry func(ctx context.Context, fn func() error) error
	// Waiting, when set, is told when a grouped write (groupCommit) finds
	// the writer's turn taken and waits for it (the driver's tests).
	Waiting func()
	// WriterTurn, with OneWriter, returns the turn that this process's
	// writers of the database named where share (every pool on one SQLite
	// file, the embedded queue's included); nil: a turn per store.
	WriterTurn func(where string) *writeturn.Turn
	// ListTables is a query returning the names of the tables where
	// seqbox keeps its own (on PostgreSQL: in seqbox's schema, whatever
	// the connection's search_path).
	ListTables string
	// Meta names seqbox_meta so that it can be read before the migration
	// transaction enters seqbox's schema ("seqbox"."seqbox_meta" on
	// PostgreSQL); empty means seqbox_meta.
	Meta string
	// MigrationLock, when set, runs first in the migration transaction so
	// that processes opening one database at once migrate one at a time
	// (dialect.XactLock(dialect.StoreMigrationLock) on PostgreSQL).
	MigrationLock string
	// Check, when set, runs first on every open (in the migration
	// transaction, or on the pool for store.ReadOnly) and refuses a
	// database whose layout seqbox cannot use (PostgreSQL: seqbox tables
	// in another schema of the search_path, which would hide its own).
	Check func(ctx context.Context, q Querier) error
	// Foreign lists what the database holds that is not seqbox's, in
	// words ("table customers", "user_version=7"); store.Exclusive
	// refuses a database without seqbox_meta when it lists anything.
	Foreign func(ctx context.Context, q Querier) ([]string, error)
	// StorageFull classifies the driver's errors: whether err says the
	// disk is full or failing (the driver's own codes; ENOSPC from the OS
	// is recognized for every driver). Nil: by ENOSPC alone.
	StorageFull func(err error) bool
	// Enter, when set, runs in the migration transaction just before
	// seqbox creates anything: PostgreSQL creates seqbox's schema and makes
	// it the transaction's search_path, so the unqualified DDL lands there.
	// EnsureTables runs it too: the tables beside seqbox's own go there.
	Enter func(ctx context.Context, tx *sql.Tx) error
	// Schema is seqbox's schema on PostgreSQL ("" on SQLite).
	Schema string
	// Legacy, when set, finds the table that name, unqualified, reaches
	// on the store's pool, and describes it; nil when it reaches none. It
	// runs in the migration transaction before Enter, so that the name
	// resolves as it did for an earlier seqbox that created a table there
	// outside its seqbox_… names (seqbox serve's gateway_… tables; on
	// PostgreSQL: through the application's search_path, then seqbox's
	// schema). Nil: such tables are never taken over.
	Legacy func(ctx context.Context, q Querier, name string) (*Table, error)
	// Pipeline, when set, runs statements in the transaction on conn with
	// one round trip (store.Pipeliner; PostgreSQL's pipeline mode), the
	// rows each affected in order. A batch's transaction then has a
	// connection of its own, which the pool gets back at its end.
	Pipeline func(ctx context.Context, conn *sql.Conn, stmts []store.Statement) ([]int64, error)
	// Refused, with Pipeline, classifies a pipeline's failure: true when
	// the server answered a statement with an error, so that nothing of
	// the pipeline's implicit transaction was committed. With it, the
	// pool's single statements on the agent path are sent together
	// (pipeGroup); nil: each goes alone.
	Refused func(err error) bool
	// GroupFirst, when set, is sent first in each pipeGroup send of
	// several statements, in its implicit transaction: on PostgreSQL it
	// bounds how long the send waits for a row lock (lock_timeout), so
	// that one statement's wait cannot hold the others of its send for
	// longer; a send that times out is refused and each statement goes
	// alone, waiting as it would have without the group.
	GroupFirst string
}

// Querier is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Store is a store.Store over a database/sql pool.
type Store struct {
	db      *sql.DB
	dialect Dialect
	// stmts caches prepared statements when the dialect asks for it.
	stmts *stmtCache
	// writer is the turn of this process's one writer (OneWriter).
	writer *writeturn.Turn
	// wconn, with OneWriter, is the one connection the store's write
	// transactions run on (beginOnWriterConn); wmu guards the field.
	wmu   sync.Mutex
	wconn *sql.Conn
	// group commits the pool's single writes together (OneWriter).
	group *groupCommit
	// pipes sends the pool's single statements together (Refused).
	pipes *pipeGroup
	// location names the database (SQLite: the file; PostgreSQL: host,
	// database and schema), for transports that acknowledge in the
	// store's transaction.
	location string
	// closeOnce makes Close idempotent; closeErr is its first result.
	closeOnce sync.Once
	closeErr  error
}

// SetLocation records the file the store's tables live in.
func (s *Store) SetLocation(path string) { s.location = path }

// Location names the database the store's tables live in, or "" when
// unknown.
func (s *Store) Location() string { return s.location }

// OneWriter reports whether the store runs one write transaction at a
// time (SQLite): a second batch waits in Begin for the first to end,
// where on other stores it waits for the rows the first one locked.
// Tests use it to know where a delivery will wait.
func (s *Store) OneWriter() bool { return s.dialect.OneWriter }

const metaTable = "seqbox_meta"

// MetaTable creates the table that marks a database as seqbox's and holds
// its schema version.
const MetaTable = `CREATE TABLE IF NOT EXISTS seqbox_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)`

// Owners recorded in seqbox_meta under the name "owner".
const (
	// OwnerSeqbox marks a database a store.Exclusive open created or
	// took: seqbox's own (and its built-in handlers' tables).
	OwnerSeqbox = "seqbox"
	// OwnerApplication marks a database the library adopted with
	// store.Adopt: it is the application's, and store.Exclusive refuses it.
	OwnerApplication = "application"
)

// Open opens the store on db with store.Adopt: it creates and migrates
// seqbox's own tables next to whatever else the database holds.
func Open(ctx context.Context, db *sql.DB, d Dialect, where string) (*Store, error) {
	return OpenWith(ctx, db, d, where, store.Adopt)
}

// OpenWith opens the store on db as access allows:
//
//   - store.Adopt creates and migrates seqbox's tables next to the
//     application's, and records that the database is the application's.
//   - store.Exclusive does the same only for a database that is empty or
//     seqbox's (it has seqbox_meta and was not adopted); anything else is
//     refused with store.ErrForeignDatabase before anything is written.
//   - store.ReadOnly writes nothing: it requires seqbox_meta at the schema
//     version this seqbox knows.
//
// A database migrated by a newer seqbox is refused with
// store.ErrSchemaTooNew in every mode.
func OpenWith(ctx context.Context, db *sql.DB, d Dialect, where string, access store.Access) (*Store, error) {
	s := &Store{db: db, dialect: d}
	var err error
	switch access {
	case store.Adopt, store.Exclusive:
		if d.Retry != nil {
			err = d.Retry(ctx, func() error { return s.migrate(ctx, where, access) })
		} else {
			err = s.migrate(ctx, where, access)
		}
	case store.ReadOnly:
		err = s.checkReadable(ctx, where)
	default:
		err = fmt.Errorf("%s: %s: unknown access mode %d", d.Name, where, int(access))
	}
	if err != nil {
		return nil, err
	}
	if d.CacheStatements {
		s.stmts = &stmtCache{db: db}
	}
	s.writer = new(writeturn.Turn)
	if d.WriterTurn != nil {
		s.writer = d.WriterTurn(where)
	}
	if d.OneWriter {
		s.group = newGroupCommit(s)
	}
	if d.Pipeline != nil && d.Refused != nil {
		pool := s.executor(nil)
		s.pipes = newPipeGroup(db, d, pool.alone)
	}
	opened.Store(db, d)
	return s, nil
}

// NoSeqboxData is the error of a read-only open of a database that holds
// no seqbox schema.
func NoSeqboxData(where string) error {
	return fmt.Errorf("%s holds no seqbox data (no %s)", where, metaTable)
}

// CheckExclusive returns nil when a store.Exclusive open may take the
// database q reads: it is empty, or it has seqbox_meta and was not adopted
// by an application. Otherwise it returns store.ErrForeignDatabase naming
// where and what was found. It only reads.
func CheckExclusive(ctx context.Context, q Querier, d Dialect, where string) error {
	tables, err := tablesOf(ctx, q, d.ListTables)
	if err != nil {
		return fmt.Errorf("%s: cannot read schema of %s: %w", d.Name, where, err)
	}
	if tables[metaTable] {
		owner, _, err := readMeta(ctx, q, d, "owner")
		if err != nil {
			return fmt.Errorf("%s: %s: read %s: %w", d.Name, where, metaTable, err)
		}
		if owner == OwnerApplication {
			return fmt.Errorf("%w: %s is an application's database (the seqbox library adopted it: %s owner=%s); refusing to touch it: "+
				"this command works only on an empty or seqbox-only database", store.ErrForeignDatabase, where, metaTable, owner)
		}
	}
	if d.Foreign == nil {
		return nil
	}
	found, err := d.Foreign(ctx, q)
	if err != nil {
		return fmt.Errorf("%s: cannot read schema of %s: %w", d.Name, where, err)
	}
	if tables[metaTable] {
		// seqbox's own database may hold the tables of the CLI's own
		// handlers (replay's record_*, chaos_*, bench_*), nothing else.
		found = slices.DeleteFunc(found, cliObject)
	} else {
		// Without seqbox_meta, even seqbox-looking tables are someone
		// else's: only an empty database is seqbox's to create.
		for name := range tables {
			// seqbox_queue alone is an embedded queue's file, seqbox's too.
			if strings.HasPrefix(name, "seqbox_") && name != "seqbox_queue" {
				found = append(found, "table "+name)
			}
		}
		slices.Sort(found)
	}
	if len(found) == 0 {
		return nil
	}
	if len(found) > 3 {
		found = append(found[:3:3], fmt.Sprintf("… (%d more)", len(found)-3))
	}
	what := "and no " + metaTable
	if tables[metaTable] {
		what = "beside seqbox's tables"
	}
	return fmt.Errorf("%w: %s holds %s %s; refusing to touch it: this command works only on an empty or seqbox-only database",
		store.ErrForeignDatabase, where, strings.Join(found, ", "), what)
}

// cliObject reports whether an object Foreign listed ("table record_x") is
// one that the CLI's own handlers create in a database seqbox made.
func cliObject(obj string) bool {
	_, name, _ := strings.Cut(obj, " ")
	name = name[strings.LastIndexByte(name, '.')+1:] // schema-qualified on PostgreSQL
	for _, p := range []string{"record_", "chaos_", "bench_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// checkReadable checks, writing nothing, that the database holds seqbox's
// schema at the version this seqbox knows.
func (s *Store) checkReadable(ctx context.Context, where string) error {
	d := s.dialect
	if d.Check != nil {
		if err := d.Check(ctx, s.db); err != nil {
			return err
		}
	}
	current, seqboxData, err := schemaVersion(ctx, s.db, d, where)
	if err != nil {
		return err
	}
	if !seqboxData {
		return NoSeqboxData(where)
	}
	switch {
	case current > len(migrations):
		return fmt.Errorf("%w: %s is at schema version %d, this seqbox knows %d; upgrade seqbox",
			store.ErrSchemaTooNew, where, current, len(migrations))
	case current < len(migrations):
		return fmt.Errorf("%s: %s is at schema version %d and this seqbox needs %d; it does not migrate a database when it inspects it, "+
			"nor in purge or effects resolve: open it once from its consumer on this version (the library, or seqbox serve) to migrate it", d.Name, where, current, len(migrations))
	}
	return nil
}

func (s *Store) migrate(ctx context.Context, where string, access store.Access) error {
	d := s.dialect
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin migration on %s: %w", d.Name, where, err)
	}
	defer tx.Rollback() //nolint:errcheck // after commit this is a no-op
	if d.MigrationLock != "" {
		if _, err := tx.ExecContext(ctx, d.MigrationLock); err != nil {
			return fmt.Errorf("%s: lock for migration: %w", d.Name, err)
		}
	}
	if d.Check != nil {
		if err := d.Check(ctx, tx); err != nil {
			return err
		}
	}
	if access == store.Exclusive {
		// Checked again under the lock: another process may have written
		// since the driver's own look before opening.
		if err := CheckExclusive(ctx, tx, d, where); err != nil {
			return err
		}
	}
	current, _, err := schemaVersion(ctx, tx, d, where)
	if err != nil {
		return err
	}
	if current > len(migrations) {
		return fmt.Errorf("%w: %s is at schema version %d, this seqbox knows %d; upgrade seqbox",
			store.ErrSchemaTooNew, where, current, len(migrations))
	}
	// The Go parts of the migrations to run look first, before Enter, where
	// names resolve as on the store's pool.
	steps, err := pendingSteps(ctx, tx, d, current)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", d.Name, where, err)
	}
	if d.Enter != nil {
		if err := d.Enter(ctx, tx); err != nil {
			return fmt.Errorf("%s: %s: %w", d.Name, where, err)
		}
	}
	if _, err := tx.ExecContext(ctx, MetaTable); err != nil {
		return fmt.Errorf("%s: create %s: %w", d.Name, metaTable, err)
	}
	for _, m := range migrations[current:] {
		if err := ddl.Exec(ctx, tx, d.SQL, m.SQL); err != nil {
			return fmt.Errorf("%s: migration %d: %w", d.Name, m.Version, err)
		}
		if step := steps[m.Version]; step != nil {
			if err := step(ctx, tx); err != nil {
				return fmt.Errorf("%s: migration %d: %w", d.Name, m.Version, err)
			}
		}
	}
	if current != len(migrations) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO seqbox_meta (name, value) VALUES ('schema_version', $1)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, strconv.Itoa(len(migrations))); err != nil {
			return fmt.Errorf("%s: record schema_version: %w", d.Name, err)
		}
	}
	// Who the database belongs to: an adopted database is the
	// application's from then on; an exclusive open marks a database
	// nobody claimed yet as seqbox's.
	if err := recordOwner(ctx, tx, access); err != nil {
		return fmt.Errorf("%s: record owner in %s: %w", d.Name, metaTable, err)
	}
	return tx.Commit()
}

// recordOwner writes the owner row when it is missing or, for an adopting
// open, says anything but application.
func recordOwner(ctx context.Context, tx *sql.Tx, access store.Access) error {
	var owner string
	switch err := tx.QueryRowContext(ctx, `SELECT value FROM seqbox_meta WHERE name = 'owner'`).Scan(&owner); err {
	case nil, sql.ErrNoRows:
	default:
		return err
	}
	want := OwnerSeqbox
	if access == store.Adopt {
		want = OwnerApplication
	}
	if owner == want || (owner != "" && access == store.Exclusive) {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO seqbox_meta (name, value) VALUES ('owner', $1)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, want)
	return err
}

// schemaVersion reads the schema version of the database q reaches: 0
// when seqbox_meta holds none, and hasMeta false when there is no
// seqbox_meta at all. It reads through the dialect's names, so it works
// before the migration transaction's Enter.
func schemaVersion(ctx context.Context, q Querier, d Dialect, where string) (version int, hasMeta bool, err error) {
	tables, err := tablesOf(ctx, q, d.ListTables)
	if err != nil {
		return 0, false, fmt.Errorf("%s: cannot read schema of %s: %w", d.Name, where, err)
	}
	if !tables[metaTable] {
		return 0, false, nil
	}
	v, found, err := readMeta(ctx, q, d, "schema_version")
	if err != nil {
		return 0, true, fmt.Errorf("%s: %s: read schema_version: %w", d.Name, where, err)
	}
	if !found {
		return 0, true, nil
	}
	if version, err = strconv.Atoi(v); err != nil || version < 0 {
		return 0, true, fmt.Errorf("%s: %s: schema_version %q is not a version number", d.Name, where, v)
	}
	return version, true, nil
}

// readMeta reads one row of seqbox_meta through the dialect's name for it.
func readMeta(ctx context.Context, q Querier, d Dialect, name string) (value string, found bool, err error) {
	meta := d.Meta
	if meta == "" {
		meta = metaTable
	}
	switch err := q.QueryRowContext(ctx, `SELECT value FROM `+meta+` WHERE name = $1`, name).Scan(&value); err {
	case nil:
		return value, true, nil
	case sql.ErrNoRows:
		return "", false, nil
	default:
		return "", false, err
	}
}

// tablesOf runs a table-listing query.
func tablesOf(ctx context.Context, q Querier, listTables string) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, listTables)
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
func (s *Store) Begin(ctx context.Context) (store.ExecutorTx, error) {
	var unlock func()
	if s.dialect.OneWriter {
		// Take turns here rather than in SQLite's busy handler, which
		// polls with sleeps: the next batch starts the moment the last
		// one commits, and a producer's (writeturn.Urgent) goes first.
		// Other processes still meet busy_timeout.
		release, err := s.writer.Take(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: begin: %w", s.dialect.Name, err)
		}
		unlock = release
	}
	// The transaction itself does not end with ctx: database/sql would
	// roll it back the moment ctx is cancelled, and the drivers run COMMIT
	// under it, so a shutdown racing a COMMIT could leave a batch committed
	// and reported as failed. Its statements still take ctx, so a
	// cancelled batch fails at its next statement and rolls back; a batch
	// that reached COMMIT commits and says so.
	tx, err := s.openTx(ctx, unlock)
	if err != nil {
		if unlock != nil {
			unlock()
		}
		return nil, fmt.Errorf("%s: begin: %w", s.dialect.Name, err)
	}
	if e, ok := tx.(*Executor); ok && s.group != nil {
		// This transaction holds the one writer's turn: it commits the
		// writes waiting on the pool too (groupCommit).
		e.carrier = s.group
		if err := s.group.carry(e); err != nil {
			_ = e.Rollback()
			return nil, fmt.Errorf("%s: begin: %w", s.dialect.Name, err)
		}
	}
	return tx, nil
}

// openTx opens a batch's transaction, on a connection of its own when the
// dialect pipelines; unlock ends the writer's turn with it.
func (s *Store) openTx(ctx context.Context, unlock func()) (store.ExecutorTx, error) {
	if s.dialect.Pipeline != nil {
		t, err := s.beginPipe(ctx)
		if err != nil {
			return nil, err
		}
		t.unlock = unlock
		return t, nil
	}
	var tx *sql.Tx
	var err error
	if unlock != nil {
		tx, err = s.beginOnWriterConn(ctx)
	} else {
		tx, err = s.db.BeginTx(context.WithoutCancel(ctx), nil)
	}
	if err != nil {
		return nil, err
	}
	e := s.executor(tx)
	e.unlock = unlock
	return e, nil
}

// beginOnWriterConn begins a write transaction on the store's writer
// connection, which only the holder of the writer's turn uses: its page
// cache stays warm from one write transaction to the next, where a pool
// connection's was stale after every other connection's commit and read
// the pages again (in the agent path's profile, a tenth of the writer's
// time went to those reads and to opening connections). A connection
// found broken is replaced once.
func (s *Store) beginOnWriterConn(ctx context.Context) (*sql.Tx, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for attempt := 0; ; attempt++ {
		if s.wconn == nil {
			conn, err := s.db.Conn(context.WithoutCancel(ctx))
			if err != nil {
				return nil, err
			}
			s.wconn = conn
		}
		tx, err := s.wconn.BeginTx(context.WithoutCancel(ctx), nil)
		if err == nil || attempt > 0 || !(errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn)) {
			return tx, err
		}
		_ = s.wconn.Close()
		s.wconn = nil
	}
}

// UnwrapTx runs the driver's statements in a transaction the caller opened
// on the pool.
func (s *Store) UnwrapTx(tx *sql.Tx) store.ExecutorTx {
	return s.executor(tx)
}

// Executor runs the driver's statements on the pool.
func (s *Store) Executor() store.Executor {
	return s.executor(nil)
}

// executor runs statements in tx, or on the pool when tx is nil.
func (s *Store) executor(tx *sql.Tx) *Executor {
	e := &Executor{db: s.db, pool: s.db, lockRow: s.dialect.LockRow, serialWriters: s.dialect.OneWriter, arrays: s.dialect.Arrays, positional: s.dialect.Positional, storageFull: s.dialect.StorageFull, stmts: s.stmts}
	if tx != nil {
		e.db, e.tx = tx, tx
	} else {
		e.group, e.pipes = s.group, s.pipes
	}
	return e
}

// DB returns the pool.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the pool. Closing again does nothing and returns the
// first Close's result (an explicit Close and a deferred one are fine).
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

// close is Close's work, done once.
func (s *Store) close() error {
	if s.group != nil {
		s.group.close()
	}
	if s.pipes != nil {
		s.pipes.close()
	}
	s.wmu.Lock()
	if s.wconn != nil {
		_ = s.wconn.Close() // once its transaction, if any, has ended
		s.wconn = nil
	}
	s.wmu.Unlock()
	opened.Delete(s.db)
	s.stmts.close()
	return s.db.Close()
}

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
