package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/sqlitedb"
)

// Work is what one run cost its database, in counts that do not depend
// on how fast or how loaded the machine is: a change to the agent path
// that writes fewer rows or commits less shows here in a single run,
// where its rate moves less than the runs' spread (`seqbox bench agent
// --work`; docs/benchmarks.md, "Work per event"). A count the store
// cannot give is -1.
type Work struct {
	// Units are the run's messages (core) or events (agent).
	Units int
	// Commits are, on SQLite, the COMMITs of the writer pools'
	// transactions (a write outside one, as the embedded queue's receive
	// is, is not counted: `--pages` counts every write transaction from
	// the WAL); on PostgreSQL, the transaction ids the server gave out, to
	// any database: every write transaction, with or without BEGIN (a
	// savepoint that writes takes one too, and so does a transaction that
	// rolled back).
	Commits int64
	// Statements are the statements SQLite's writer pools ran, or, on
	// PostgreSQL with pg_stat_statements installed in the database, all
	// the statements it ran (-1 without it).
	Statements int64
	// Blocks are the buffer pages PostgreSQL's statements read or found
	// in the buffer pool (with pg_stat_statements; -1 without it and on
	// SQLite).
	Blocks int64
	// WALBytes is the write-ahead log PostgreSQL wrote, cluster-wide (-1
	// on SQLite).
	WALBytes int64
	// WriteBytes is what this process wrote towards storage (Linux's
	// /proc/self/io write_bytes: SQLite's WAL and checkpoints; -1 on
	// PostgreSQL, whose server writes, or where the kernel does not say).
	WriteBytes int64
}

// Line renders the work as `seqbox bench agent --work` prints it: each
// count divided by the run's units.
func (w Work) Line(run string) string {
	per := func(n int64) string {
		if n < 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(n)/float64(max(w.Units, 1)))
	}
	return fmt.Sprintf("agent work: run=%s units=%d commits_per_unit=%s statements_per_unit=%s "+
		"blocks_per_unit=%s wal_bytes_per_unit=%s write_bytes_per_unit=%s",
		run, w.Units, per(w.Commits), per(w.Statements), per(w.Blocks), per(w.WALBytes), per(w.WriteBytes))
}

// workMeter measures the work of a stretch of a run: start, then stop.
type workMeter interface {
	// stop ends the measure and returns what units cost.
	stop(ctx context.Context, units int) (Work, error)
	// abandon ends the measure, if stop did not: a run that failed
	// deferred it.
	abandon()
}

// startWork starts measuring the work done on db from now: on
// PostgreSQL through the server's statistics, on SQLite through the
// statement recording and the kernel's count of this process's writes.
// Without on, it measures nothing.
func startWork(ctx context.Context, db string, on bool) (workMeter, error) {
	if !on {
		return noWork{}, nil
	}
	if pgdb.IsURL(db) {
		return startPGWork(ctx, db)
	}
	stop, ok := sqlitedb.RecordStatements()
	if !ok {
		return nil, fmt.Errorf("work: another recording of SQLite's statements is running (--statements and --work cannot share a run)")
	}
	return &sqliteWork{stopRecording: stop, written: processWriteBytes()}, nil
}

// noWork measures nothing.
type noWork struct{}

func (noWork) stop(context.Context, int) (Work, error) { return Work{}, nil }
func (noWork) abandon()                                {}

// sqliteWork counts SQLite's statements and commits, and this process's
// writes.
type sqliteWork struct {
	stopRecording func() []sqlitedb.StatementTime
	written       int64
}

func (s *sqliteWork) abandon() { s.close() }

func (s *sqliteWork) stop(_ context.Context, units int) (Work, error) {
	w := Work{Units: units, Blocks: -1, WALBytes: -1, WriteBytes: -1}
	for _, st := range s.close() {
		w.Statements += st.Count
		if st.Query == "COMMIT" {
			w.Commits += st.Count
		}
	}
	// Nothing written to storage is no SQLite run's: the file is on a
	// file system with no device under it (tmpfs), which Linux does not
	// count.
	if end := processWriteBytes(); end >= 0 && s.written >= 0 && end > s.written {
		w.WriteBytes = end - s.written
	}
	return w, nil
}

// close ends the recording once and returns what it saw.
func (s *sqliteWork) close() []sqlitedb.StatementTime {
	if s.stopRecording == nil {
		return nil
	}
	stop := s.stopRecording
	s.stopRecording = nil
	return stop()
}

// processWriteBytes is this process's write_bytes in /proc/self/io
// (Linux: the bytes of the pages it dirtied on files with a device under
// them), or -1.
func processWriteBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes: "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// pgWork reads the server's counters before and after: the WAL's
// position and the next transaction id, which move at once, and, when
// pg_stat_statements is installed in the database, its statements and
// blocks (the database's own statistics reach the server up to ten
// seconds late from an idle connection, so they are not used).
type pgWork struct {
	db    *sql.DB
	stats string // pg_stat_statements, schema-qualified; "" without it
	start pgCounters
}

// walPosition is PostgreSQL's WAL position in bytes: what the server has
// written to its log so far, every database's traffic counted.
const walPosition = `pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`

// pgCounters are the server's cumulative counters.
type pgCounters struct {
	wal, xids, statements, blocks int64
	// dealloc is how many entries pg_stat_statements dropped to make
	// room (-1 where it does not say, before PostgreSQL 14): a run during
	// which it moved lost statements.
	dealloc int64
}

func startPGWork(ctx context.Context, url string) (*pgWork, error) {
	db, err := pgdb.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("work: %w", err)
	}
	p := &pgWork{db: db}
	var schema sql.NullString
	err = db.QueryRowContext(ctx, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
		WHERE e.extname = 'pg_stat_statements'`).Scan(&schema)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		db.Close()
		return nil, fmt.Errorf("work: %w", err)
	default:
		p.stats = pgdb.QuoteIdent(schema.String) + ".pg_stat_statements"
	}
	if p.start, err = p.read(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return p, nil
}

func (p *pgWork) read(ctx context.Context) (pgCounters, error) {
	c := pgCounters{statements: -1, blocks: -1}
	err := p.db.QueryRowContext(ctx, `SELECT `+walPosition+`, pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&c.wal, &c.xids)
	if err != nil {
		return c, fmt.Errorf("work: the server's counters: %w", err)
	}
	if p.stats == "" {
		return c, nil
	}
	// Not loaded at the server's start, the extension cannot be read: the
	// counts it gives are left out.
	if err := p.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(calls), 0)::bigint, COALESCE(SUM(shared_blks_hit + shared_blks_read), 0)::bigint
		FROM `+p.stats+` s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database()`).Scan(&c.statements, &c.blocks); err != nil {
		p.stats, c.statements, c.blocks = "", -1, -1
		return c, nil
	}
	c.dealloc = -1
	_ = p.db.QueryRowContext(ctx, `SELECT dealloc FROM `+p.stats+`_info`).Scan(&c.dealloc)
	return c, nil
}

func (p *pgWork) abandon() { p.db.Close() } // a second Close does nothing

func (p *pgWork) stop(ctx context.Context, units int) (Work, error) {
	defer p.db.Close()
	end, err := p.read(ctx)
	if err != nil {
		return Work{}, err
	}
	w := Work{Units: units, Commits: end.xids - p.start.xids, Statements: -1, Blocks: -1,
		WALBytes: end.wal - p.start.wal, WriteBytes: -1}
	// Not when pg_stat_statements dropped entries meanwhile (its
	// pg_stat_statements.max is too small for the run), or was reset.
	lost := end.dealloc != p.start.dealloc || end.statements < p.start.statements
	if end.statements >= 0 && p.start.statements >= 0 && !lost {
		w.Statements, w.Blocks = end.statements-p.start.statements, end.blocks-p.start.blocks
	}
	return w, nil
}
