// Package sqlitedb opens SQLite files the way every seqbox component must:
// WAL, synchronous=FULL, BEGIN IMMEDIATE and a busy timeout, so that several
// processes can share one file without SQLITE_BUSY surprises; or read-only,
// writing nothing at all. OpenRelaxed adds a pool whose commits do not
// wait for the disk, for writes whose loss is harmless (the embedded
// queue's leases).
//
// A database is named by a path or by a SQLite "file:" URI. A path is a
// path: every character in it, '#', '?' and '%' included, is part of the
// file name, and is escaped when the driver's "file:" DSN is built. A
// "file:" URI is handed to SQLite as written (seqbox only adds its own
// parameters). Any other "scheme://" is refused.
package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/seqbox/seqbox/internal/dialect"
	"github.com/seqbox/seqbox/internal/sqlstore"
	"github.com/seqbox/seqbox/store"

	"modernc.org/sqlite" // also registers the "sqlite" driver
)

// ListTables lists the user tables of a SQLite database.
const ListTables = `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`

// MetaTable creates the table that marks a database as seqbox's.
const MetaTable = sqlstore.MetaTable

// Dialect is SQLite's flavour of the shared SQL.
var Dialect = sqlstore.Dialect{
	SQL:             dialect.SQLite,
	CacheStatements: true,
	OneWriter:       true,
	WriterTurn:      Turn,
	Waiting:         contended,
	Retry:           RetryBusy,
	StorageFull:     StorageFull,
	ListTables:      ListTables,
	Foreign:         Foreign,
	Legacy:          Legacy,
}

// header is how every SQLite database file starts.
const header = "SQLite format 3\x00"

// cannotIndex holds the result codes of a read-only connection that cannot
// create the -shm a WAL-mode database needs in a directory it cannot write
// (SQLITE_CANTOPEN when there is a -wal but no -shm).
var cannotIndex = map[int]bool{
	8 | 5<<8: true, // SQLITE_READONLY_CANTINIT
	8 | 6<<8: true, // SQLITE_READONLY_DIRECTORY
	14:       true, // SQLITE_CANTOPEN
}

var schemeRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// Scheme returns the scheme of a value of the form "scheme://…", or "".
// A "file:" URI without "//" and a plain path have none.
func Scheme(value string) string {
	if m := schemeRE.FindStringSubmatch(value); m != nil {
		return m[1]
	}
	return ""
}

// Target is where a path or "file:" URI points.
type Target struct {
	// Where is the value as given, for messages.
	Where string
	// Path is the database file on disk; empty for an in-memory database.
	Path string
	// uri is the user's "file:" URI up to its query, and query its raw
	// query; both empty for a plain path.
	uri, query string
}

// Locate resolves a --db style value (a file path, or a "file:" URI) to
// the file it names, without touching anything.
func Locate(value string) (Target, error) {
	if value == "" {
		return Target{}, fmt.Errorf("sqlite: empty database path")
	}
	if !strings.HasPrefix(value, "file:") {
		if s := Scheme(value); s != "" {
			if s == "postgres" || s == "postgresql" {
				return Target{}, fmt.Errorf("sqlite: %s is a PostgreSQL URL, not a SQLite file: open it with the postgres store",
					redactURL(value))
			}
			return Target{}, fmt.Errorf("sqlite: %s: unsupported scheme %q: seqbox stores are a SQLite file path or a postgres:// URL",
				value, s)
		}
		return Target{Where: value, Path: value}, nil
	}
	// A SQLite URI (https://sqlite.org/uri.html): file:[//authority]path[?query][#fragment].
	rest := strings.TrimPrefix(value, "file:")
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	t := Target{Where: value}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		t.query = rest[i+1:]
		rest = rest[:i]
	}
	t.uri = "file:" + rest
	if strings.HasPrefix(rest, "//") {
		auth, p, _ := strings.Cut(rest[2:], "/")
		if auth != "" && auth != "localhost" {
			return Target{}, fmt.Errorf("sqlite: %s: a file: URI may name no host but localhost", value)
		}
		rest = "/" + p
	}
	p, err := unescape(rest)
	if err != nil {
		return Target{}, fmt.Errorf("sqlite: %s: %w", value, err)
	}
	q, _ := url.ParseQuery(t.query)
	if p != ":memory:" && p != "" && q.Get("mode") != "memory" && q.Get("vfs") != "memdb" {
		t.Path = p
	}
	return t, nil
}

// sharedCache reports whether t's URI asks for SQLite's shared cache
// (cache=shared), under which an in-memory database is one for every
// connection of the process.
func (t Target) sharedCache() bool {
	q, _ := url.ParseQuery(t.query)
	return q.Get("cache") == "shared"
}

// unescape decodes %HH sequences the way SQLite decodes a URI's path.
func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", fmt.Errorf("bad %%-escape in file: URI")
		}
		b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
		i += 2
	}
	return b.String(), nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}

// escapePath escapes every byte of a file path that SQLite's URI parser
// could read as something else ('?', '#', '%', …).
func escapePath(p string) string {
	const safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/"
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if strings.IndexByte(safe, p[i]) >= 0 {
			b.WriteByte(p[i])
		} else {
			fmt.Fprintf(&b, "%%%02X", p[i])
		}
	}
	return b.String()
}

// DSN is the driver's data source name for t with the extra parameters.
func (t Target) DSN(params url.Values) string {
	extra := params.Encode()
	if t.uri == "" {
		base := "file:" + escapePath(t.Path)
		if filepath.IsAbs(t.Path) {
			// "file:///abs" keeps a path that starts with "//" a path.
			base = "file://" + escapePath(t.Path)
		}
		return base + "?" + extra
	}
	if t.query == "" {
		return t.uri + "?" + extra
	}
	return t.uri + "?" + t.query + "&" + extra
}

// fileState is what a look at the file, before any driver opens it, found.
type fileState struct {
	exists bool
	size   int64
	// wal is set when the header says the database is in WAL mode.
	wal bool
}

// examine checks the file t names before any pool opens it: its
// directory exists, it is a regular file, and, when not empty, it starts
// with the SQLite header, whose WAL flag it reports.
//
// The header is read through SQLite (page 1, from sqlite_dbpage, on a
// read-only connection, firstPage, which writes nothing and creates no
// file beside it), never with a descriptor of seqbox's own: closing any
// descriptor of a file drops every POSIX lock the process holds on it,
// SQLite's included, and SQLite, which counts its locks per file in the
// process, would never take them again. A process that opened its
// database a second time (the embedded queue's pool beside the store's, a
// gateway's pools, a read-only look) or after the application's own pool
// was left without its shared lock: the next process to close its last
// connection cleanly took itself for the last and deleted the -wal and
// -shm under it (docs/design.md §15.1). SQLite's own close keeps a
// descriptor of a file the process still holds locks on.
func examine(ctx context.Context, t Target) (fileState, error) {
	if t.Path == "" {
		return fileState{}, nil
	}
	if dir := filepath.Dir(t.Path); dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fileState{}, fmt.Errorf("sqlite: directory of %s does not exist", t.Where)
		}
	}
	st, err := os.Stat(t.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileState{}, nil
	}
	if err != nil {
		return fileState{}, fmt.Errorf("sqlite: %s: %w", t.Where, err)
	}
	if st.IsDir() {
		return fileState{}, fmt.Errorf("sqlite: %s is a directory, not a database file", t.Where)
	}
	if !st.Mode().IsRegular() {
		return fileState{}, fmt.Errorf("%w: %s is not a regular file; refusing to touch it", store.ErrForeignDatabase, t.Where)
	}
	state := fileState{exists: true, size: st.Size()}
	if state.size == 0 {
		return state, nil
	}
	foreign := func(what string) error {
		return fmt.Errorf("%w: %s is not a SQLite database (%s); refusing to touch it", store.ErrForeignDatabase, t.Where, what)
	}
	if state.size < 100 {
		// Too short to hold a header: refused from its size alone.
		return fileState{}, foreign(fmt.Sprintf("%d bytes, shorter than a SQLite header", state.size))
	}
	h, err := firstPage(ctx, t)
	if err != nil {
		var coded interface{ Code() int }
		if errors.As(err, &coded) && coded.Code()&0xff == 26 { // SQLITE_NOTADB
			return fileState{}, foreign("SQLite reads no database header in it: " + err.Error())
		}
		return fileState{}, fmt.Errorf("sqlite: %s: %w", t.Where, err)
	}
	if len(h) < 100 || string(h[:len(header)]) != header {
		return fileState{}, foreign("it does not start with the SQLite header")
	}
	// Bytes 18 and 19: file format write and read versions, 2 = WAL.
	state.wal = h[18] == 2 || h[19] == 2
	return state, nil
}

// firstPage reads page 1 of the file t names through a read-only
// connection. A file with a -wal and a -shm beside it may be in use: it
// is read as its users see it, through them (TestExamineReadsAFileInUseThroughItsWAL);
// the main file alone is consistent only between checkpoints, and in the
// middle of one SQLite may read its schema as malformed. Without them it
// is read immutable=1, which creates neither.
func firstPage(ctx context.Context, t Target) ([]byte, error) {
	q := url.Values{}
	q.Set("mode", "ro")
	// Read through the -wal, it waits, as the pool's connections do, for
	// a process that holds the file's WAL locks: one recovering its
	// -wal after a crash answers SQLITE_BUSY_RECOVERY meanwhile
	// (TestOpenWaitsForARecoveryElsewhere).
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMS))
	if !exists(t.Path+"-wal") || !exists(t.Path+"-shm") {
		q.Set("immutable", "1")
	}
	db, err := sql.Open("sqlite", Target{Where: t.Where, Path: t.Path}.DSN(q))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var page []byte
	err = RetryBusy(ctx, func() error {
		return db.QueryRowContext(ctx, `SELECT data FROM sqlite_dbpage WHERE pgno = 1`).Scan(&page)
	})
	return page, err
}

// Open opens (creating if needed) the SQLite database at path with
// store.Adopt: it must be a SQLite database (or empty, or missing), and it
// is switched to WAL. Nothing in it is created or changed otherwise.
func Open(ctx context.Context, path string) (*sql.DB, error) {
	return OpenAccess(ctx, path, store.Adopt)
}

// OpenAccess opens the SQLite database at path (a file path or a "file:"
// URI) as access allows:
//
//   - store.Adopt: any SQLite database (or an empty or missing file, which
//     is created) is opened read-write and switched to WAL.
//   - store.Exclusive: before anything opens it read-write, the file is
//     inspected read-only, and a database that is not empty or seqbox's
//     is refused with store.ErrForeignDatabase, byte for byte untouched.
//     The inspection creates no file beside it (immutable=1 for a WAL-mode
//     file whose -wal is missing or empty), except the -shm SQLite needs
//     to read a -wal that holds transactions when that -shm is missing.
//   - store.ReadOnly: the file must exist; it is opened with mode=ro and
//     query_only, nothing is switched, and an empty file is refused before
//     any driver sees it. A read-only directory works unless the file's
//     -wal holds transactions and its -shm is missing.
//
// In every mode a non-empty file that does not start with the SQLite
// header is refused with store.ErrForeignDatabase before any driver opens
// it. The returned pool does not check for seqbox's tables; the store does.
func OpenAccess(ctx context.Context, path string, access store.Access) (*sql.DB, error) {
	t, err := Locate(path)
	if err != nil {
		return nil, err
	}
	st, err := examine(ctx, t)
	if err != nil {
		return nil, err
	}
	switch access {
	case store.ReadOnly:
		return openReadOnly(ctx, t, st)
	case store.Exclusive:
		if st.size > 0 {
			if err := inspectExclusive(ctx, t, st); err != nil {
				return nil, err
			}
		}
	case store.Adopt:
	default:
		return nil, fmt.Errorf("sqlite: %s: unknown access mode %d", t.Where, int(access))
	}
	return openWriter(ctx, t, "FULL")
}

// OpenRelaxed opens a second pool on a database Open has opened, whose
// commits do not wait for the disk (synchronous=NORMAL): in WAL mode such
// a commit survives the process (a kill -9 loses nothing), and reaches
// the disk with the next commit of a FULL connection, or the next
// checkpoint, whichever comes first; only a crash of the machine in
// between loses it. It is for writes whose loss is harmless, as the
// embedded queue's leases are: a lease lost makes its messages visible
// again, which the inbox absorbs. Everything else commits through Open's
// pool.
func OpenRelaxed(ctx context.Context, path string) (*sql.DB, error) {
	t, err := Locate(path)
	if err != nil {
		return nil, err
	}
	return openWriter(ctx, t, "NORMAL")
}

// openWriter opens t read-write in WAL mode with the given synchronous
// setting.
func openWriter(ctx context.Context, t Target, synchronous string) (*sql.DB, error) {
	if (t.Path == "" || t.Path == ":memory:") && !t.sharedCache() {
		// SQLite gives each connection an in-memory database of its
		// own, unless the URI asks for a shared cache: the pools would
		// each see an empty one.
		return nil, fmt.Errorf("sqlite: %s is in memory: seqbox needs a database file, or a shared in-memory one (file::memory:?cache=shared): its pools open several connections, and each would see an empty database of its own", t.Where)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMS))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+synchronous+")")
	q.Add("_pragma", "foreign_keys(ON)")
	if checkpointsHeld.Load() {
		q.Add("_pragma", "wal_autocheckpoint(0)") // HoldCheckpoints
	}
	q.Set("_txlock", "immediate")
	base, err := sqlite.NewConnector(t.DSN(q))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", t.Where, err)
	}
	// Its writes outside transactions take the file's writer turn, and
	// its statements and BEGINs outlast a busy database (patient.go).
	pc := &patientConnector{base: base}
	if t.Path != "" {
		if abs, err := filepath.Abs(t.Path); err == nil {
			pc.turn = turnOf(abs)
		}
	}
	db := sql.OpenDB(pc)
	// Keep the connections a busy moment opened: database/sql keeps two
	// idle by default, and each new SQLite connection parses the schema
	// and runs its pragmas again. Under the agent path's concurrent reads
	// (a decider's checks, the ledger's) that churn would take much of the
	// process's CPU (docs/benchmarks-history.md §19, "CPU profiles"). An
	// idle one closes after a minute.
	db.SetMaxIdleConns(maxIdleConns)
	db.SetConnMaxIdleTime(time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, refusal(t, err)
	}
	return db, nil
}

// maxIdleConns is how many connections a pool keeps open while idle.
const maxIdleConns = 64

// inspectExclusive decides, through a read-only connection that creates no
// -wal, -shm or -journal file, whether an exclusive open may take the
// database.
func inspectExclusive(ctx context.Context, t Target, st fileState) error {
	if st.wal && hasContent(t.Path+"-wal") && !exists(t.Path+"-shm") {
		// SQLite would create the -shm to read the -wal: refuse instead.
		return fmt.Errorf("%w: %s holds transactions in %s-wal that only its own tools can read (no -shm); refusing to touch it",
			store.ErrForeignDatabase, t.Where, filepath.Base(t.Path))
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(10000)")
	if st.wal && !hasContent(t.Path+"-wal") {
		// A WAL-mode file with nothing in its -wal: a mode=ro connection
		// would create -wal and -shm beside it to read it. Everything
		// committed is in the main file, so read that alone. A writer that
		// starts meanwhile is caught by the check repeated under the write
		// lock.
		q.Set("immutable", "1")
	}
	ro, err := sql.Open("sqlite", Target{Where: t.Where, Path: t.Path}.DSN(q))
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", t.Where, err)
	}
	defer ro.Close()
	conn, err := ro.Conn(ctx)
	if err != nil {
		return refusal(t, err)
	}
	defer conn.Close()
	if err := sqlstore.CheckExclusive(ctx, conn, Dialect, t.Where); err != nil {
		if errors.Is(err, store.ErrForeignDatabase) {
			return err
		}
		return refusal(t, err)
	}
	return nil
}

// refusal words an error of opening a file: a file SQLite cannot read as a
// database is foreign.
func refusal(t Target, err error) error {
	msg := err.Error()
	if strings.Contains(msg, "not a database") || strings.Contains(msg, "malformed") {
		return fmt.Errorf("%w: %s is not a usable SQLite database (%v); refusing to touch it", store.ErrForeignDatabase, t.Where, err)
	}
	return fmt.Errorf("sqlite: %s: %w", t.Where, err)
}

// exists reports whether a file exists at p.
func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// hasContent reports whether the file at p exists and is not empty.
func hasContent(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Size() > 0
}

// openReadOnly opens an existing database for reading only.
//
// It uses mode=ro and query_only. A file in rollback-journal mode gets no
// file beside it. A WAL-mode file is read through its -wal and -shm, as
// every SQLite reader does, so committed transactions still in the -wal are
// seen; SQLite creates -shm (and an empty -wal) when they are missing and
// the directory is writable. When the directory is not writable and -shm
// is missing, SQLite cannot read the file that way:
// then, and only when the -wal is missing or empty (so that every committed
// transaction is in the main file), the file is opened immutable=1, which
// reads the main file without locks or the -shm. A -wal with content in a
// directory seqbox cannot write is an error that says so.
func openReadOnly(ctx context.Context, t Target, st fileState) (*sql.DB, error) {
	if t.Path != "" && !st.exists {
		return nil, fmt.Errorf("sqlite: %s: %w", t.Where, syscall.ENOENT) // errors.Is fs.ErrNotExist
	}
	if t.Path != "" && st.size == 0 {
		return nil, sqlstore.NoSeqboxData(t.Where)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "query_only(1)")
	if t.Path != "" && st.wal && !exists(t.Path+"-wal") {
		// No -wal: no connection has the file open in WAL mode, and every
		// committed transaction is in the main file. Reading it as
		// immutable creates no -wal or -shm, which another user's reader
		// would otherwise leave behind, owned by them, locking the
		// database's owner out of it.
		q.Set("immutable", "1")
		return probeOrRefuse(ctx, t, q)
	}
	if t.Path != "" && st.wal && hasContent(t.Path+"-wal") && !exists(t.Path+"-shm") {
		return nil, fmt.Errorf("sqlite: cannot read %s read-only: transactions wait in %s-wal and reading them would create %s-shm; "+
			"let its consumer run (or open it once read-write) first", t.Where, filepath.Base(t.Path), filepath.Base(t.Path))
	}
	db, err := probe(ctx, t.DSN(q))
	if err == nil {
		return db, nil
	}
	var coded interface{ Code() int }
	if t.Path == "" || !st.wal || !errors.As(err, &coded) || !cannotIndex[coded.Code()] {
		return nil, refusal(t, err)
	}
	if hasContent(t.Path + "-wal") {
		return nil, fmt.Errorf("sqlite: cannot read %s read-only: it is in WAL mode with transactions still in %s-wal, "+
			"and SQLite cannot create %s-shm to read them because the directory is not writable: %w",
			t.Where, filepath.Base(t.Path), filepath.Base(t.Path), err)
	}
	q.Set("immutable", "1")
	return probeOrRefuse(ctx, t, q)
}

func probeOrRefuse(ctx context.Context, t Target, q url.Values) (*sql.DB, error) {
	db, err := probe(ctx, t.DSN(q))
	if err != nil {
		return nil, refusal(t, err)
	}
	return db, nil
}

// probe opens a pool and reads the schema once, so that a file SQLite
// cannot read fails here.
func probe(ctx context.Context, dsn string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master`).Scan(&n); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// QueueTriggers are the triggers the embedded queue keeps on
// seqbox_queue (transport/embedded's heads.go), seqbox's own.
var QueueTriggers = []string{"seqbox_queue_behind_insert", "seqbox_queue_behind_delete"}

// Foreign lists what a SQLite database holds that is not seqbox's: every
// table, view and index whose name does not start with seqbox_, every
// trigger but the embedded queue's own (QueueTriggers; SQLite's own
// sqlite_ objects aside), and a non-zero user_version or application_id.
func Foreign(ctx context.Context, q sqlstore.Querier) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY rowid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var typ, name, tbl string
		if err := rows.Scan(&typ, &name, &tbl); err != nil {
			return nil, err
		}
		if (typ == "table" || typ == "index") && strings.HasPrefix(name, "seqbox_") && strings.HasPrefix(tbl, "seqbox_") {
			continue
		}
		if typ == "trigger" && tbl == "seqbox_queue" && slices.Contains(QueueTriggers, name) {
			continue
		}
		out = append(out, typ+" "+name)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, pragma := range []string{"user_version", "application_id"} {
		var v int64
		if err := q.QueryRowContext(ctx, `PRAGMA `+pragma).Scan(&v); err != nil {
			return nil, err
		}
		if v != 0 {
			out = append(out, fmt.Sprintf("%s=%d", pragma, v))
		}
	}
	return out, nil
}

// Legacy finds the table name is in the main database (sqlite_master),
// with its columns as pragma table_info gives them; nil when there is no
// table of that name (a view, say, is not one).
func Legacy(ctx context.Context, q sqlstore.Querier, name string) (*sqlstore.Table, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM main.sqlite_master WHERE type = 'table' AND name = $1`, name).Scan(&n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT name, lower(type), "notnull", pk FROM pragma_table_info($1, 'main') ORDER BY cid`, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	t := &sqlstore.Table{Name: `main."` + strings.ReplaceAll(name, `"`, `""`) + `"`}
	for rows.Next() {
		var c sqlstore.Column
		var pk int
		if err := rows.Scan(&c.Name, &c.Type, &c.NotNull, &pk); err != nil {
			return nil, err
		}
		c.PrimaryKey = pk > 0
		t.Columns = append(t.Columns, c)
	}
	return t, rows.Err()
}

// redactURL hides a password in a URL, for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

// FileOf is the absolute path of the file a --db value or path names, or
// "" when it names none (an in-memory database, an unreadable value).
func FileOf(value string) string {
	t, err := Locate(value)
	if err != nil || t.Path == "" {
		return ""
	}
	abs, err := filepath.Abs(t.Path)
	if err != nil {
		return ""
	}
	return abs
}
