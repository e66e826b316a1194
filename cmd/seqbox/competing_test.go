package main

// Competing consumers (issue 5, item 3): four OS processes consume the same
// stream and race on every identity and every key version; the database's
// constraints alone must keep every effect exactly once and in per-key
// order.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seqbox/seqbox/internal/chaos"
	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/transport/embedded"
	"github.com/stretchr/testify/require"
)

const (
	competingProcs  = 4
	competingEvents = 1500
	competingKeys   = 40
	competingDups   = 75 // exact copies, republished later in the stream
	// competingChunk is how many messages of the stream are published to
	// every queue at a time.
	competingChunk = 25
	// competingQuiet is how long every queue must stay empty before the
	// processes are stopped.
	competingQuiet = 1500 * time.Millisecond
	// competingLimit bounds the consumption phase: a deadline to fail
	// instead of hanging, not a speed the test asserts, so generous
	// enough for a loaded machine (it took about 10 s alone, and over 45
	// s while four other test runs shared two cores).
	competingLimit = 3 * time.Minute
)

func TestCompetingProcessesPostgres(t *testing.T) {
	runCompeting(t, pgtest.URL(t))
}

func TestCompetingProcessesSQLite(t *testing.T) {
	runCompeting(t, filepath.Join(t.TempDir(), "seqbox.db"))
}

// competingEvent is one logical event of the workload.
type competingEvent struct {
	id, key string
	version int64
	body    []byte
}

// competingWorkload is the stream every queue receives, and its oracle.
type competingWorkload struct {
	events []competingEvent // logical events, in publication order
	stream [][]byte         // what is published: events plus exact copies
	copies map[string]int   // id -> publications in one stream (1 or 2)
	final  map[string]int64 // key -> last version
}

// competingStream builds ~competingEvents events over competingKeys keys:
// versions 1..N per key, in version order within a key, interleaved at
// random across keys, plus competingDups exact copies placed a little later
// than their original.
func competingStream(seed uint64) competingWorkload {
	r := rand.New(rand.NewPCG(seed, seed^0xc0ffee))
	w := competingWorkload{copies: map[string]int{}, final: map[string]int64{}}
	type slot struct {
		at   float64
		body []byte
	}
	var slots []slot
	for i := range competingEvents {
		key := fmt.Sprintf("acct-%02d", r.IntN(competingKeys))
		if i < competingKeys {
			key = fmt.Sprintf("acct-%02d", i) // every key appears
		}
		w.final[key]++
		v := w.final[key]
		id := fmt.Sprintf("%s-v%d", key, v)
		body, err := json.Marshal(map[string]any{
			"specversion": "1.0", "id": id, "source": "competing", "type": fmt.Sprintf("account.step%d", v),
			"partitionkey": key, "objectversion": v, "data": map[string]any{"n": v, "key": key},
		})
		if err != nil {
			panic(err)
		}
		w.events = append(w.events, competingEvent{id: id, key: key, version: v, body: body})
		w.copies[id] = 1
		slots = append(slots, slot{at: float64(i), body: body})
	}
	for _, i := range r.Perm(competingEvents)[:competingDups] {
		e := w.events[i]
		w.copies[e.id]++
		slots = append(slots, slot{at: float64(i) + 1.5 + float64(r.IntN(150)), body: e.body})
	}
	sort.SliceStable(slots, func(a, b int) bool { return slots[a].at < slots[b].at })
	for _, s := range slots {
		w.stream = append(w.stream, s.body)
	}
	return w
}

// competingProc is one `seqbox chaos worker` process.
type competingProc struct {
	queue  string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
	err    error
}

// lockedBuffer is a bytes.Buffer safe to read while the child writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (p *competingProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func runCompeting(t *testing.T, db string) {
	ctx := context.Background()
	isPG := pgdb.IsURL(db)
	const seed = 5
	w := competingStream(seed)
	deliveries := competingProcs * len(w.stream)
	t.Logf("workload: seed %d, %d events over %d keys, %d exact copies, %d messages per queue, %d queues, %d deliveries",
		seed, len(w.events), len(w.final), competingDups, len(w.stream), competingProcs, deliveries)

	// The store first (seqbox_meta marks the database as seqbox's), as
	// the chaos harness does, then one queue per process. The processes
	// create the record handler's tables themselves.
	st, err := dbopen.Store(ctx, db)
	require.NoError(t, err)
	defer st.Close()
	queues := make([]*embedded.Queue, competingProcs)
	for i := range queues {
		q, err := embedded.Open(ctx, db, embedded.Config{Name: fmt.Sprintf("q%d", i)})
		require.NoError(t, err)
		defer q.Close()
		queues[i] = q
	}
	var deadlocksBefore, rollbacksBefore int64
	if isPG {
		deadlocksBefore, rollbacksBefore = pgConflictStats(t, st.DB())
	}

	// On PostgreSQL, sample the backends waiting on a lock while the
	// processes run: evidence that they block on each other's uncommitted
	// inbox rows and key rows, not only meet committed ones.
	var waits *lockWaits
	if isPG {
		waits = sampleLockWaits(st.DB())
		defer waits.stop()
	}

	start := time.Now()
	procs := make([]*competingProc, 0, competingProcs)
	// Whatever happens, no process outlives the test.
	defer func() {
		for _, p := range procs {
			if !p.exited() {
				_ = p.cmd.Process.Signal(syscall.SIGKILL)
				<-p.done
			}
		}
	}()
	for i := range competingProcs {
		p := &competingProc{queue: fmt.Sprintf("q%d", i), stderr: &lockedBuffer{}, done: make(chan struct{})}
		p.cmd = exec.Command(bin, "chaos", "worker", "--mode", "consume", "--queue", p.queue, "--db", db,
			"--lease", "2s", "--workers", "2", "--batch", "32")
		p.cmd.Env = environ()
		p.cmd.Stderr = p.stderr
		require.NoError(t, p.cmd.Start())
		go func() {
			p.err = p.cmd.Wait()
			close(p.done)
		}()
		procs = append(procs, p)
	}
	// The stream arrives while the processes run, a chunk at a time into
	// every queue, so that they work on the same messages at the same time.
	for off := 0; off < len(w.stream); off += competingChunk {
		chunk := w.stream[off:min(off+competingChunk, len(w.stream))]
		for _, q := range queues {
			require.NoError(t, q.PublishBatch(ctx, chunk))
		}
	}
	published := time.Since(start)

	// Consume until every queue is empty, and has stayed empty for a while
	// (a nacked message comes back within a second).
	depths := func() (string, int) {
		var parts []string
		total := 0
		for i, q := range queues {
			ready, leased, err := q.Depth(ctx)
			require.NoError(t, err)
			total += ready + leased
			parts = append(parts, fmt.Sprintf("q%d ready=%d leased=%d", i, ready, leased))
		}
		return strings.Join(parts, ", "), total
	}
	var emptySince time.Time
	for {
		for _, p := range procs {
			require.False(t, p.exited(), "process %s exited early: %v\nstderr:\n%s", p.queue, p.err, p.stderr.String())
		}
		desc, total := depths()
		switch {
		case total > 0:
			emptySince = time.Time{}
		case emptySince.IsZero():
			emptySince = time.Now()
		}
		if !emptySince.IsZero() && time.Since(emptySince) >= competingQuiet {
			break
		}
		if time.Since(start) > competingLimit {
			var state []string
			for _, p := range procs {
				state = append(state, fmt.Sprintf("%s exited=%v stderr=%q", p.queue, p.exited(), head(p.stderr.String(), 3)))
			}
			t.Fatalf("queues not drained after %s: %s\nprocesses: %s", competingLimit, desc, strings.Join(state, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
	drained := emptySince.Sub(start)

	// SIGTERM: a clean shutdown, exit status 0.
	for _, p := range procs {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	batchFailures := 0
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			t.Fatalf("process %s did not stop within 15s of SIGTERM", p.queue)
		}
		stderr := p.stderr.String()
		require.NoError(t, p.err, "process %s did not exit cleanly; stderr:\n%s", p.queue, stderr)
		batchFailures += strings.Count(stderr, "batch failed")
		if stderr != "" {
			t.Logf("process %s stderr (%d lines), first lines:\n%s", p.queue, strings.Count(stderr, "\n"), head(stderr, 5))
		}
	}

	res := verifyCompeting(t, st.DB(), w)
	t.Logf("published in %s; drained all queues in %s (%.0f deliveries/s across %d processes); stopped cleanly",
		published.Round(time.Millisecond), drained.Round(time.Millisecond), float64(deliveries)/drained.Seconds(), competingProcs)
	t.Logf("effects=%d (events %d), audit outcomes %v, non-applied results=%d (need >= %d), held then unparked=%d",
		res.effects, len(w.events), res.audit, res.nonApplied, deliveries-len(w.events), res.audit["held"])
	t.Logf("batch failures logged by the processes (rolled back and redelivered): %d", batchFailures)
	if isPG {
		deadlocks, rollbacks := pgConflictStats(t, st.DB())
		waits.stop()
		t.Logf("PostgreSQL: %d samples of pg_stat_activity (every %s) saw %d backends waiting on a lock, by statement %v; deadlocks=%d, rolled-back transactions=%d "+
			"during the run (a seqbox key-conflict retry rolls back to a savepoint and leaves no row: not visible in "+
			"the database)", waits.samples, lockWaitEvery, waits.waiting, waits.byStatement,
			deadlocks-deadlocksBefore, rollbacks-rollbacksBefore)
		// A batch locks its keys (SELECT … FOR UPDATE) before it inserts
		// its identities, so a process mostly waits there, and sometimes
		// on another's uncommitted inbox row (an identity of a key it had
		// not locked yet).
		require.Positive(t, waits.byStatement["insert seqbox_inbox"]+waits.byStatement["select"],
			"no process was ever seen waiting on another's key lock or uncommitted inbox row: the processes did not overlap")
	}
}

// lockWaitEvery is how often sampleLockWaits looks.
const lockWaitEvery = 5 * time.Millisecond

// lockWaits counts, over samples of pg_stat_activity, the backends of the
// test database waiting on a lock, by the statement they wait in.
type lockWaits struct {
	samples, waiting int
	byStatement      map[string]int
	cancel           context.CancelFunc
	done             chan struct{}
	once             sync.Once
}

func sampleLockWaits(db *sql.DB) *lockWaits {
	ctx, cancel := context.WithCancel(context.Background())
	w := &lockWaits{byStatement: map[string]int{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(lockWaitEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rows, err := db.QueryContext(ctx, `SELECT query FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`)
			if err != nil {
				continue
			}
			w.samples++
			for rows.Next() {
				var q string
				if rows.Scan(&q) == nil {
					w.waiting++
					w.byStatement[statementKind(q)]++
				}
			}
			rows.Close()
		}
	}()
	return w
}

// stop ends the sampling; the counters are stable afterwards.
func (w *lockWaits) stop() {
	w.once.Do(func() { w.cancel(); <-w.done })
}

// statementKind names a waiting statement by its verb and table.
func statementKind(q string) string {
	f := strings.Fields(q)
	for i, word := range f {
		if strings.HasPrefix(word, "seqbox_") || strings.HasPrefix(word, "record_") {
			return strings.ToLower(f[0]) + " " + word
		}
		if i > 8 {
			break
		}
	}
	if len(f) > 0 {
		return strings.ToLower(f[0])
	}
	return "?"
}

// pgConflictStats reads the server's deadlock and rollback counters for the
// test database.
func pgConflictStats(t *testing.T, db *sql.DB) (deadlocks, rollbacks int64) {
	t.Helper()
	require.NoError(t, db.QueryRow(`SELECT deadlocks, xact_rollback FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&deadlocks, &rollbacks))
	return deadlocks, rollbacks
}

type competingResult struct {
	effects    int
	audit      map[string]int
	nonApplied int
}

// verifyCompeting checks the database against the workload's oracle.
func verifyCompeting(t *testing.T, db *sql.DB, w competingWorkload) competingResult {
	t.Helper()
	ctx := context.Background()
	res := competingResult{audit: map[string]int{}}
	known := map[string]competingEvent{}
	for _, e := range w.events {
		known[e.id] = e
	}

	// Every logical event exactly one effect; per key, effects in commit
	// order are versions 1..N.
	rows, err := db.QueryContext(ctx, `SELECT source, id, partitionkey, objectversion FROM seqbox_record_effects
		WHERE consumer = $1 ORDER BY n`, chaos.Consumer)
	require.NoError(t, err)
	perID := map[string]int{}
	perKey := map[string][]int64{}
	var problems []string
	for rows.Next() {
		var src, id, key string
		var v sql.NullInt64
		require.NoError(t, rows.Scan(&src, &id, &key, &v))
		res.effects++
		perID[id]++
		if e, ok := known[id]; !ok || src != "competing" || key != e.key || !v.Valid || v.Int64 != e.version {
			problems = append(problems, fmt.Sprintf("unexpected effect %s/%s key=%s v=%v", src, id, key, v))
		}
		perKey[key] = append(perKey[key], v.Int64)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	for _, e := range w.events {
		if n := perID[e.id]; n != 1 {
			problems = append(problems, fmt.Sprintf("%s: %d effects, want exactly 1", e.id, n))
		}
	}
	for key, n := range w.final {
		vs := perKey[key]
		good := int64(len(vs)) == n
		for i, v := range vs {
			good = good && v == int64(i+1)
		}
		if !good {
			problems = append(problems, fmt.Sprintf("%s: effect order %v, want 1..%d", key, vs, n))
		}
	}
	require.Empty(t, problems, "effects: %d problems", len(problems))
	require.Equal(t, len(w.events), res.effects)

	// Inbox: one row per identity, applied.
	rows, err = db.QueryContext(ctx, `SELECT id, outcome FROM seqbox_inbox WHERE consumer = $1`, chaos.Consumer)
	require.NoError(t, err)
	inbox := map[string]string{}
	for rows.Next() {
		var id, outcome string
		require.NoError(t, rows.Scan(&id, &outcome))
		inbox[id] = outcome
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.Len(t, inbox, len(w.events), "inbox rows")
	for _, e := range w.events {
		if inbox[e.id] != "applied" {
			problems = append(problems, fmt.Sprintf("%s: inbox outcome %q, want applied", e.id, inbox[e.id]))
		}
	}
	require.Empty(t, problems, "inbox")

	// Keys: every key at its last version, none blocked.
	rows, err = db.QueryContext(ctx, `SELECT partitionkey, version, blocked FROM seqbox_keys WHERE consumer = $1`, chaos.Consumer)
	require.NoError(t, err)
	nkeys := 0
	for rows.Next() {
		var key string
		var v sql.NullInt64
		var blocked int
		require.NoError(t, rows.Scan(&key, &v, &blocked))
		nkeys++
		if !v.Valid || v.Int64 != w.final[key] || blocked != 0 {
			problems = append(problems, fmt.Sprintf("key %s: version %v blocked=%d, want %d unblocked", key, v, blocked, w.final[key]))
		}
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.Empty(t, problems, "keys")
	require.Equal(t, len(w.final), nkeys, "key rows")

	// Nothing parked (held, blocked, collision, version_conflict), nothing
	// dead-lettered, nothing left retrying.
	var parked []string
	rows, err = db.QueryContext(ctx, `SELECT id, reason, detail FROM seqbox_parked WHERE consumer = $1`, chaos.Consumer)
	require.NoError(t, err)
	for rows.Next() {
		var id, reason, detail string
		require.NoError(t, rows.Scan(&id, &reason, &detail))
		parked = append(parked, id+" "+reason+": "+detail)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.Empty(t, parked, "parked rows")
	var dlq, retries int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_dlq WHERE consumer = $1`, chaos.Consumer).Scan(&dlq))
	require.Zero(t, dlq, "DLQ rows")
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_retries WHERE consumer = $1`, chaos.Consumer).Scan(&retries))
	require.Zero(t, retries, "retry rows")

	// The races really happened: each of the 4 processes decided every
	// delivery of its own queue, so per identity there is one applied
	// decision and at least 4*copies-1 others, every one recorded: a
	// duplicate counted on its inbox row (or, for a new identity losing a
	// version race, stale or version_conflict in the audit). A held decision is the same delivery that later
	// applied from the parked table: not counted as non-applied.
	rows, err = db.QueryContext(ctx, `SELECT id, outcome FROM seqbox_audit WHERE consumer = $1`, chaos.Consumer)
	require.NoError(t, err)
	perIDOthers := map[string]int{}
	heldPerID := map[string]int{}
	for rows.Next() {
		var id, outcome string
		require.NoError(t, rows.Scan(&id, &outcome))
		res.audit[outcome]++
		switch outcome {
		case "duplicate", "stale", "version_conflict":
			perIDOthers[id]++
			res.nonApplied++
		case "held":
			heldPerID[id]++
		}
	}
	require.NoError(t, rows.Err())
	rows.Close()
	// Duplicates are counted on their inbox rows rather than audited.
	rows, err = db.QueryContext(ctx, `SELECT id, duplicates FROM seqbox_inbox WHERE consumer = $1`, chaos.Consumer)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var n int
		require.NoError(t, rows.Scan(&id, &n))
		perIDOthers[id] += n
		res.audit["duplicate"] += n
		res.nonApplied += n
	}
	require.NoError(t, rows.Err())
	rows.Close()
	for outcome, n := range res.audit {
		switch outcome {
		case "duplicate", "held":
		default:
			problems = append(problems, fmt.Sprintf("%d %s decisions: impossible for this workload", n, outcome))
		}
	}
	for _, e := range w.events {
		if want := competingProcs*w.copies[e.id] - 1; perIDOthers[e.id] < want {
			problems = append(problems, fmt.Sprintf("%s: %d duplicate decisions, want >= %d", e.id, perIDOthers[e.id], want))
		}
		if heldPerID[e.id] > 1 {
			problems = append(problems, fmt.Sprintf("%s: held %d times", e.id, heldPerID[e.id]))
		}
	}
	require.Empty(t, problems, "audit accounting (outcomes %v)", res.audit)
	require.GreaterOrEqual(t, res.nonApplied, competingProcs*len(w.stream)-len(w.events))

	return res
}

// head is the first n lines of s.
func head(s string, n int) string {
	ls := strings.SplitN(s, "\n", n+1)
	if len(ls) > n {
		ls = ls[:n]
	}
	return strings.Join(ls, "\n")
}
