package bench

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/pprof"
	"text/tabwriter"
	"time"
)

// Cost as the work grows (issue 37): seqbox keeps every identity for its
// retention, 30 days by default, so a consumer at 100 events/s holds 260
// million inbox rows that each insert's unique key and indexes must work
// against, and that the retention purge must remove as fast as they come.

const (
	// prefillSources is how many sources the seeded identities and the
	// measured streams share: a few producers, as in a deployment, so
	// that the measured inserts land among the seeded rows in the
	// primary key.
	prefillSources = 16
	// prefillRetention is the span of the seeded identities' retention:
	// Config.Retention's default, so the seed is an inbox in its steady
	// state (the oldest identity about to expire, the newest just in).
	prefillRetention = 30 * 24 * time.Hour
	// prefillKeys is how many partition keys the seeded identities
	// name (in their inbox rows only: no key rows are seeded).
	prefillKeys = 100_000
)

// PrefillOptions configure `seqbox bench prefill`.
type PrefillOptions struct {
	// DB is a SQLite path or a postgres:// URL.
	DB string
	// Rows is how many identities are seeded, live (retention not
	// ended) for the full inbox's measurement.
	Rows int
	// Messages is how many messages each saturated run applies (queued
	// beforehand); a tenth of it warms the consumer up first, untimed.
	Messages int
	// Duration is how long each fixed-rate run is measured, after a
	// second of warm-up.
	Duration time.Duration
	// Workers, Batch: the consumer's Config.Workers and Config.BatchSize.
	Workers, Batch int
	// Keys is how many partition keys each measured stream spreads over.
	Keys int
	// PurgeBatch is the purge's batch: identities per purge transaction.
	PurgeBatch int
	// OnPhase, when set, is told as each phase starts, steps and ends,
	// and at every tenth of a seed of several transactions.
	OnPhase func(Phase)
	// CPUProfile, when set, names the files a CPU profile of each
	// saturated run is written to: CPUProfile-empty.pprof and
	// CPUProfile-full.pprof.
	CPUProfile string
}

// PrefillInbox is what the core measured on one state of the inbox.
type PrefillInbox struct {
	// Saturated: messages queued beforehand, applied in Elapsed, with
	// their receive→commit latencies under that backlog.
	Saturated Mode
	// Target is the fixed rate of the latency run, half the empty
	// inbox's saturated rate for both states; Got is the rate applied
	// in its window and Latency receive→commit there.
	Target  int
	Got     float64
	Latency Latency
	// Counts is how long Executor.Counts (the gauges Run refreshes every
	// 15 s when Config.Metrics is set) took on this inbox.
	Counts time.Duration
	// Written is what the database wrote during the saturated run (see
	// written), -1 where it could not be read.
	Written int64
}

// PrefillResult is what `seqbox bench prefill` measured.
type PrefillResult struct {
	// Store is "sqlite" or "postgres"; Rows the identities seeded;
	// Before the inbox's identities (every consumer's) before the seed.
	Store        string
	Rows         int
	Before       int64
	Seed         time.Duration
	Empty, Full  PrefillInbox
	Purge        PurgeResult
	PurgeWritten int64
	// Vacuum is how long VACUUM of the inbox took after the purge, on
	// PostgreSQL (0 on SQLite, which frees a deleted row's space at once).
	Vacuum       time.Duration
	Check        string
	CheckPassed  bool
	checkDetails string
}

// Rate is the saturated rate of a measured inbox.
func (in PrefillInbox) Rate() float64 { return rate(in.Saturated.Messages, in.Saturated.Elapsed) }

// PurgeRate is the identities the retention purge removed per second.
func (r PrefillResult) PurgeRate() float64 { return rate(r.Purge.Removed, r.Purge.Elapsed) }

// IngestRate is the rate at which the core adds identities while the
// purge has any to remove: its saturated rate on the full inbox. No
// identity expires before the inbox holds a whole retention's worth, so
// the purge never races the empty inbox's rate.
func (r PrefillResult) IngestRate() float64 { return r.Full.Rate() }

// Sustained is the most messages per second the core and the purge keep
// up with together if they share one bottleneck (SQLite's one writer):
// a second of ingest at that rate costs r/I, its purge r/P, and the two
// add up to the whole second.
func (r PrefillResult) Sustained() float64 {
	i, p := r.IngestRate(), r.PurgeRate()
	if i <= 0 || p <= 0 {
		return 0
	}
	return i * p / (i + p)
}

// Line is the run's one-line summary.
func (r PrefillResult) Line() string {
	return fmt.Sprintf("prefill: store=%s rows=%d empty_msgs_per_s=%.0f empty_p99_ms=%s full_msgs_per_s=%.0f full_p99_ms=%s "+
		"rate_vs_empty=%.3f p99_vs_empty=%.2f purge_rows_per_s=%.0f ingest_msgs_per_s=%.0f purge_vs_ingest=%.2f check=%s",
		r.Store, r.Rows, r.Empty.Rate(), ms(r.Empty.Latency.P99, r.Empty.Latency.N), r.Full.Rate(), ms(r.Full.Latency.P99, r.Full.Latency.N),
		ratio(r.Full.Rate(), r.Empty.Rate()), ratio(float64(r.Full.Latency.P99), float64(r.Empty.Latency.P99)),
		r.PurgeRate(), r.IngestRate(), ratio(r.PurgeRate(), r.IngestRate()), r.Check)
}

// Prefill measures, on one database in one run, with the same consumer
// settings: the core (embedded queue, record handler, per-message
// Handler) on the inbox as it is, its saturated rate and its p99 at a
// fixed rate (half that); then the same on the inbox after o.Rows live
// identities were seeded in bulk; then the retention purge (Consumer.Purge,
// as `seqbox purge` runs it) of the oldest half of them, alone, against
// the rate at which the core adds identities to the full inbox. It prints a table, the
// purge's figures, whether the purge keeps up, the check, and last the
// line of PrefillResult.Line. It fails unless every message of the
// measured runs was applied exactly once and the purge removed exactly
// the expired identities, keeping the rest and every held or blocked one.
func Prefill(ctx context.Context, o PrefillOptions, w io.Writer) (PrefillResult, error) {
	res := PrefillResult{Rows: o.Rows, Store: "sqlite"}
	run := newRun()
	e, err := open(ctx, o.DB, "bench-"+run)
	if err != nil {
		return res, err
	}
	defer e.close()
	if e.pg {
		res.Store = "postgres"
	}
	s := newPrefillStream(run, o.Keys)
	fmt.Fprintf(w, "seqbox bench prefill  db=%s rows=%d messages=%d seconds=%g workers=%d batch=%d keys=%d purge_batch=%d\n",
		e.where, o.Rows, o.Messages, o.Duration.Seconds(), o.Workers, o.Batch, o.Keys, o.PurgeBatch)
	if err := e.st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_inbox`).Scan(&res.Before); err != nil {
		return res, err
	}
	phases := SummaryOptions{OnPhase: o.OnPhase}
	var t liveTotals

	ph := phases.phase("empty inbox")
	if res.Empty, err = s.measure(ctx, e, "e", o, 0, &t, ph.step); err != nil {
		return res, fmt.Errorf("empty inbox: %w", err)
	}
	ph.done("%.0f msgs/s, p99 %s ms at %d msgs/s", res.Empty.Rate(), ms(res.Empty.Latency.P99, res.Empty.Latency.N), res.Empty.Target)

	ph = phases.phase("seed")
	now := time.Now()
	if res.Seed, err = s.seed(ctx, e, o.Rows, now, ph); err != nil {
		return res, err
	}
	// Held and blocked identities whose retention ended long ago: the
	// purge must keep them, and they are the first its index scan meets.
	expired := now.Add(-24 * time.Hour)
	for _, k := range []struct{ source, outcome string }{{s.held, "held"}, {s.blocked, "blocked"}} {
		if err := seed(ctx, e, k.source, k.outcome, keptHeld, expired); err != nil {
			return res, err
		}
	}
	ph.done("%d identities, %.0f rows/s", o.Rows, rate(int64(o.Rows), res.Seed))
	fmt.Fprintf(w, "seed: %d live identities in %.3fs (%.0f rows/s) onto an inbox of %d, %d sources, UUID-shaped ids in random order,"+
		" retention_until spread over the next %d days; plus %d held and %d blocked whose retention ended\n",
		o.Rows, res.Seed.Seconds(), rate(int64(o.Rows), res.Seed), res.Before, prefillSources, prefillRetention/(24*time.Hour), keptHeld, keptHeld)

	ph = phases.phase("full inbox")
	if res.Full, err = s.measure(ctx, e, "f", o, res.Empty.Target, &t, ph.step); err != nil {
		return res, fmt.Errorf("full inbox: %w", err)
	}
	ph.done("%.0f msgs/s, p99 %s ms at %d msgs/s", res.Full.Rate(), ms(res.Full.Latency.P99, res.Full.Latency.N), res.Full.Target)

	// The purge runs at a clock half the retention ahead: the oldest half
	// of the seeded identities have expired by then, exactly as they
	// would have 15 days on, and the purge removes the very rows the full
	// inbox was measured against. Neither an UPDATE of retention_until
	// (on PostgreSQL a dead version of every row and a second index
	// entry, which the purge would then wade through) nor a second,
	// already expired seed (twice the seed, rows the measurement never
	// saw). The newer half stays, as a purge in a deployment works
	// against a full inbox, and the check sees it kept.
	ph = phases.phase("purge")
	if err := vacuumPhase(ctx, e); err != nil {
		return res, err
	}
	at := now.Add(prefillRetention / 2)
	before, err := s.count(ctx, e, at)
	if err != nil {
		return res, err
	}
	times := &purgeTimes{}
	purger, err := newPurger(e, func() time.Time { return at }, times)
	if err != nil {
		return res, err
	}
	w0 := written(ctx, e)
	t0 := time.Now()
	res.Purge.Removed, err = purger.Purge(ctx, o.PurgeBatch)
	res.Purge.Elapsed = time.Since(t0)
	if err != nil {
		return res, fmt.Errorf("purge: %w", err)
	}
	res.PurgeWritten = since(w0, written(ctx, e))
	if e.pg {
		// PostgreSQL's DELETE leaves the rows' index entries and heap
		// space to VACUUM: autovacuum's work, out of the purge's rate,
		// but timed here since the database pays for it.
		t0 := time.Now()
		if _, err := e.st.DB().ExecContext(ctx, `VACUUM seqbox_inbox`); err != nil {
			return res, fmt.Errorf("vacuum after the purge: %w", err)
		}
		res.Vacuum = time.Since(t0)
	}
	res.Purge.Batches = LatencyOf(times.all())
	after, err := s.count(ctx, e, at)
	if err != nil {
		return res, err
	}
	ph.done("%d identities removed, %.0f rows/s", res.Purge.Removed, res.PurgeRate())

	res.check(o, t, before, after)
	printPrefill(w, o, res, times.all())
	if !res.CheckPassed {
		return res, fmt.Errorf("check failed: %s", res.checkDetails)
	}
	return res, nil
}

// printPrefill prints the table, the purge's figures, whether it keeps
// up with the ingest, the check and, last, the summary line.
func printPrefill(w io.Writer, o PrefillOptions, r PrefillResult, batches []time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "inbox\tmessages\tmsgs/s\tsaturated_p99_ms\twritten_kb/msg\ttarget_msgs/s\tgot_msgs/s\tp50_ms\tp99_ms\tmax_ms\tcounts_ms\t")
	for _, m := range []struct {
		name string
		in   PrefillInbox
	}{{"empty", r.Empty}, {fmt.Sprintf("full(+%d)", r.Rows), r.Full}} {
		in := m.in
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%d\t%.0f\t%s\t%s\t%s\t%.1f\t\n", m.name, in.Saturated.Messages, in.Rate(),
			ms(in.Saturated.Latency.P99, in.Saturated.Latency.N), kbPer(in.Written, in.Saturated.Messages), in.Target, in.Got,
			ms(in.Latency.P50, in.Latency.N), ms(in.Latency.P99, in.Latency.N), ms(in.Latency.Max, in.Latency.N),
			float64(in.Counts)/float64(time.Millisecond))
	}
	tw.Flush()
	fmt.Fprintf(w, "latency: msgs/s and saturated_p99_ms with the messages queued beforehand; p50/p99/max receive→commit over %gs at target"+
		" (half the empty inbox's rate, for both); counts = Executor.Counts, which Run calls every 15 s when Config.Metrics is set;"+
		" each phase starts on settled tables (%s)\n", o.Duration.Seconds(), vacuumWhat(r.Store))
	fmt.Fprintf(w, "written_kb/msg: %s during the saturated run, per message (the queue's included); the purge: %s KiB per identity removed\n",
		writtenWhat(r.Store), kbPer(r.PurgeWritten, r.Purge.Removed))
	printPurgeLine(w, r.Purge, batches)
	keeps := "keeps up"
	if r.PurgeRate() <= r.IngestRate() {
		keeps = "does NOT keep up: at a sustained ingest at that rate the inbox would outgrow its retention"
	}
	fmt.Fprintf(w, "purge vs ingest: the retention purge removed %.0f identities/s (%d per transaction, alone), the core adds %.0f/s on the full inbox:"+
		" the purge %s (x%.2f); sharing one bottleneck, the two sustain %.0f msgs/s\n",
		r.PurgeRate(), o.PurgeBatch, r.IngestRate(), keeps, ratio(r.PurgeRate(), r.IngestRate()), r.Sustained())
	if r.Vacuum > 0 {
		fmt.Fprintf(w, "vacuum: VACUUM seqbox_inbox after the purge (autovacuum's work, not in the purge's rate) took %.3fs:"+
			" purge and vacuum together %.0f identities/s, x%.2f the ingest\n",
			r.Vacuum.Seconds(), rate(r.Purge.Removed, r.Purge.Elapsed+r.Vacuum), ratio(rate(r.Purge.Removed, r.Purge.Elapsed+r.Vacuum), r.IngestRate()))
	}
	status := "ok"
	if !r.CheckPassed {
		status = "FAILED"
	}
	fmt.Fprintln(w, "check: "+r.checkDetails+" "+status)
	fmt.Fprintln(w, r.Line())
}

// vacuumPhase does, untimed, before each measured phase, what the
// database does on its own between bursts, so that both phases start
// alike: on PostgreSQL VACUUM (ANALYZE) of the tables the run writes and
// a CHECKPOINT (settle), on SQLite a WAL checkpoint. Each phase publishes,
// applies and deletes tens of thousands of rows faster than autovacuum
// comes by: without it the empty inbox's phase paid for the fresh tables'
// first autovacuum and autoanalyze, and the full one started on the
// empty one's dead queue rows.
func vacuumPhase(ctx context.Context, e *env) error {
	if e.pg {
		if _, err := e.st.DB().ExecContext(ctx, `VACUUM (ANALYZE) seqbox_queue, seqbox_keys, seqbox_record_effects, seqbox_record_objects`); err != nil {
			return fmt.Errorf("vacuum: %w", err)
		}
	}
	_, err := afterBulkLoad(ctx, e)
	return err
}

// written is how many bytes the database has written so far, -1 where
// that cannot be read: on PostgreSQL the server's WAL position (every
// database's traffic on the server counts), on SQLite this process's
// writes to storage (/proc/self/io write_bytes, Linux: the SQLite library
// runs in this process), WAL and checkpoints alike. Whatever the CPU's
// load, it tells what one message costs the disk.
func written(ctx context.Context, e *env) int64 {
	if e.pg {
		var n int64
		if err := e.st.DB().QueryRowContext(ctx, `SELECT `+walPosition).Scan(&n); err != nil {
			return -1
		}
		return n
	}
	return processWriteBytes()
}

// since is what was written between two readings of written, -1 where
// either is unknown.
func since(from, to int64) int64 {
	if from < 0 || to < 0 {
		return -1
	}
	return to - from
}

// kbPer prints bytes per item in KiB, "-" when unknown.
func kbPer(bytes, n int64) string {
	if bytes < 0 || n <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(bytes)/1024/float64(n))
}

// vacuumWhat says what vacuumPhase does on a store.
func vacuumWhat(store string) string {
	if store == "postgres" {
		return "VACUUM (ANALYZE) of the tables the run writes, then CHECKPOINT"
	}
	return "wal_checkpoint(TRUNCATE)"
}

// writtenWhat says what written measures on a store.
func writtenWhat(store string) string {
	if store == "postgres" {
		return "the WAL the server generated (every database's)"
	}
	return "what this process wrote to storage, WAL and checkpoints (/proc/self/io)"
}

// liveTotals adds up the measured consumers' outcomes over the run.
type liveTotals struct {
	applied, other int64
	warns          int
}

func (t *liveTotals) add(applied, other int64, warns int) {
	t.applied += applied
	t.other += other
	t.warns += warns
}

// prefillStream names one run's identities: the seeded ones and the
// measured streams on the same sources, and the held and blocked ones
// on sources of their own.
type prefillStream struct {
	run string
	// prefix starts each of the run's prefillSources sources; held and
	// blocked are outside the range it starts.
	prefix, held, blocked string
	keys                  int
}

func newPrefillStream(run string, keys int) prefillStream {
	return prefillStream{run: run, prefix: "bench-pf-" + run + "-", held: "bench-pf-" + run + "h",
		blocked: "bench-pf-" + run + "b", keys: keys}
}

// body is message i of the measured stream tag: its source one of the
// run's, its id UUID-shaped with random leading digits (so that it lands
// anywhere among the seeded identities in the primary key, as a random
// CloudEvents id does) and ending in tag and i; its key one of s.keys of
// the stream, at version i/keys+1.
func (s prefillStream) body(tag string) func(i int) []byte {
	h := fnv.New64a()
	h.Write([]byte(s.run + tag))
	seed := h.Sum64()
	return func(i int) []byte {
		r := splitmix(seed + uint64(i))
		prefix := fmt.Sprintf("%08x-%04x-4%03x-9%03x-%s", uint32(r), uint16(r>>32), (r>>48)&0xfff, (r>>36)&0xfff, tag)
		return keyedBody(fmt.Sprintf("%s%02d", s.prefix, i%prefillSources), prefix, fmt.Sprintf("%s%s-k%d", s.run, tag, i%s.keys), i, i/s.keys+1)
	}
}

func (s prefillStream) bodies(tag string, n int) [][]byte {
	body := s.body(tag)
	out := make([][]byte, n)
	for i := range out {
		out[i] = body(i)
	}
	return out
}

// splitmix is SplitMix64's output function: a bijection that scatters
// consecutive inputs.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// measure runs the core on the inbox as it is, as the stream tag: a
// warm-up of a tenth of o.Messages (untimed), o.Messages queued
// beforehand for the saturated rate, then a feed at target (0: half the
// saturated rate) for o.Duration for the latency, and times
// Executor.Counts. What the consumers applied goes into t.
func (s prefillStream) measure(ctx context.Context, e *env, tag string, o PrefillOptions, target int, t *liveTotals, step func(string)) (PrefillInbox, error) {
	var in PrefillInbox
	step("settle")
	if err := vacuumPhase(ctx, e); err != nil {
		return in, err
	}
	step("warm-up")
	warm, err := saturated(ctx, e, s.bodies(tag+"w", max(1, o.Messages/10)), o.Workers, o.Batch)
	if err != nil {
		return in, fmt.Errorf("warm-up: %w", err)
	}
	t.add(warm.Messages, warm.other, warm.warns)
	step(fmt.Sprintf("%d messages queued beforehand", o.Messages))
	stop, err := startProfile(o.CPUProfile, map[string]string{"e": "empty", "f": "full"}[tag])
	if err != nil {
		return in, err
	}
	w0 := written(ctx, e)
	sat, err := saturated(ctx, e, s.bodies(tag+"s", o.Messages), o.Workers, o.Batch)
	stop()
	if err != nil {
		return in, fmt.Errorf("saturated: %w", err)
	}
	in.Written = since(w0, written(ctx, e))
	t.add(sat.Messages, sat.other, sat.warns)
	in.Saturated = sat.Mode
	if target <= 0 {
		target = max(1, int(in.Rate()/2))
	}
	in.Target = target
	step(fmt.Sprintf("at %d msgs/s", target))
	at, err := atRateOf(ctx, e, s.body(tag+"r"), target, o.Workers, o.Batch, o.Duration)
	if err != nil {
		return in, fmt.Errorf("at %d msgs/s: %w", target, err)
	}
	t.add(at.applied, at.other, at.warns)
	in.Got, in.Latency = at.got, at.lat
	step("Executor.Counts")
	t0 := time.Now()
	if _, err := e.st.Executor().Counts(ctx, Consumer); err != nil {
		return in, fmt.Errorf("counts: %w", err)
	}
	in.Counts = time.Since(t0)
	return in, nil
}

// startProfile starts a CPU profile written to prefix-name.pprof, and
// returns what stops it; with no prefix it does nothing.
func startProfile(prefix, name string) (func(), error) {
	if prefix == "" {
		return func() {}, nil
	}
	f, err := os.Create(prefix + "-" + name + ".pprof")
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// seedSQLite and seedPostgres insert the seeded identities x = $3..$4 of
// the run ($2 starts their sources) in one statement, generated in the
// database: the source one of prefillSources ($9), a UUID-shaped id
// whose leading digits scatter x (multiplicative hashes on SQLite, md5
// on PostgreSQL) and whose end keeps it unique, a 64-digit payload hash,
// a partition key among $8, outcome applied, received at $5 + (x+1)·$6
// and kept for $7 after: retention_until rises with x, spread over the
// retention ahead, and the inserts land in random order in the primary
// key, as a deployment's would.
const (
	seedColumns = `INSERT INTO seqbox_inbox (consumer, source, id, payload_hash, event_type, partitionkey, objectversion,
		outcome, received_at, processed_at, retention_until) `
	seedSQLite = `WITH RECURSIVE g(x) AS (SELECT $3 UNION ALL SELECT x + 1 FROM g WHERE x < $4) ` + seedColumns +
		`SELECT $1, $2 || printf('%02d', x % $9),
		printf('%08x-%04x-4%03x-8%03x-%012x', x * 2654435761 % 4294967296, x * 40503 % 65536, x * 2731 % 4096, x * 1093 % 4096, x),
		printf('%08x%08x%08x%08x%08x%08x%08x%08x', x * 2246822519 % 4294967296, x * 3266489917 % 4294967296,
			x * 668265263 % 4294967296, x * 374761393 % 4294967296, x * 1597334677 % 4294967296,
			x * 3812015801 % 4294967296, x * 2869860233 % 4294967296, x * 2654435761 % 4294967296),
		'bench.seed', $2 || 'k' || (x % $8), x / $8 + 1, 'applied', $5 + (x + 1) * $6, $5 + (x + 1) * $6, $5 + (x + 1) * $6 + $7
		FROM g`
	seedPostgres = seedColumns + `SELECT $1::text, $2::text || lpad((g % $9::bigint)::text, 2, '0'), md5($2::text || g)::uuid::text,
		md5(g::text) || md5($2::text || g), 'bench.seed', $2::text || 'k' || (g % $8::bigint), g / $8::bigint + 1, 'applied',
		$5::bigint + (g + 1) * $6::bigint, $5::bigint + (g + 1) * $6::bigint, $5::bigint + (g + 1) * $6::bigint + $7::bigint
		FROM generate_series($3::bigint, $4::bigint) g`
)

// seedCacheKiB is the page cache, in KiB, of the connection that seeds a
// SQLite inbox: room for the primary key's whole index at 10 million
// identities (about 800 MB) and a transaction's new table pages. The
// seeded ids land at random in that index; with the default 2 MB cache
// each insert read its leaf back from the file and each transaction
// spilled, and the seed slowed from 36,000 to 10,000 rows/s as the index
// grew. SQLite takes the cache's memory as pages are read, and gives it
// back when the seed ends (shrink_memory).
const seedCacheKiB = 2 << 20

// seedChunkSQLite is how many identities one SQLite seed transaction
// inserts: a transaction writes each index page it dirtied once, at its
// commit, however many of its rows landed there.
const seedChunkSQLite = 1_000_000

// seed inserts n live identities of the run, a chunk a transaction
// (seedChunk on PostgreSQL, seedChunkSQLite on SQLite, through a
// connection of its own with a page cache of seedCacheKiB), their
// retention ending over (now, now+prefillRetention], and reports each
// transaction as a step of ph and every tenth of n as a line.
func (s prefillStream) seed(ctx context.Context, e *env, n int, now time.Time, ph *phase) (time.Duration, error) {
	conn, err := e.st.DB().Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("seed: %w", err)
	}
	defer conn.Close()
	q, chunk := seedSQLite, seedChunkSQLite
	if e.pg {
		q, chunk = seedPostgres, seedChunk
	} else {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA cache_size = -%d`, seedCacheKiB)); err != nil {
			return 0, fmt.Errorf("seed: %w", err)
		}
		defer func() {
			// The connection goes back to the pool with the default cache.
			conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA cache_size = -2000`) //nolint:errcheck // best effort
			conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA shrink_memory`)      //nolint:errcheck // best effort
		}()
	}
	span := prefillRetention.Microseconds()
	step, first := span/int64(n), now.Add(-prefillRetention).UnixMicro()
	t0 := time.Now()
	tenth := 0
	for from := 0; from < n; from += chunk {
		to := min(from+chunk, n)
		if _, err := conn.ExecContext(ctx, q, Consumer, s.prefix, from, to-1, first, step, span, prefillKeys, prefillSources); err != nil {
			return 0, fmt.Errorf("seed: %w", err)
		}
		took := time.Since(t0)
		ph.step(fmt.Sprintf("%d of %d identities, %.0f rows/s", to, n, rate(int64(to), took)))
		if to < n && to*10/n > tenth {
			tenth = to * 10 / n
			ph.done("%d of %d identities, %.0f rows/s", to, n, rate(int64(to), took))
		}
	}
	return time.Since(t0), nil
}

// prefillCounts are the rows the check looks at, as a purge at a clock
// would see them.
type prefillCounts struct {
	// purgeable: every run's identities of the bench consumer expired at
	// the clock, neither held nor blocked, what the purge must remove.
	purgeable int64
	// rows: this run's identities (seeded and measured); expired: those
	// of them expired at the clock; kept: its held and blocked ones.
	rows, expired, kept int64
	// effects: the record handler's rows for this run's messages.
	effects int64
}

func (s prefillStream) count(ctx context.Context, e *env, at time.Time) (prefillCounts, error) {
	var c prefillCounts
	err := e.st.DB().QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM seqbox_inbox WHERE consumer = $1 AND retention_until < $2 AND outcome NOT IN ('held', 'blocked')),
		(SELECT COUNT(*) FROM seqbox_inbox WHERE consumer = $1 AND source >= $3 AND source < $4),
		(SELECT COUNT(*) FROM seqbox_inbox WHERE consumer = $1 AND source >= $3 AND source < $4 AND retention_until < $2),
		(SELECT COUNT(*) FROM seqbox_inbox WHERE consumer = $1 AND source IN ($5, $6)),
		(SELECT COUNT(*) FROM seqbox_record_effects WHERE consumer = $1 AND source >= $3 AND source < $4)`,
		Consumer, at.UnixMicro(), s.prefix, prefixEnd(s.prefix), s.held, s.blocked).
		Scan(&c.purgeable, &c.rows, &c.expired, &c.kept, &c.effects)
	if err != nil {
		return c, fmt.Errorf("count: %w", err)
	}
	return c, nil
}

// check requires that every message the measured consumers applied has
// exactly one inbox row and one effect (and that they had no other
// outcome), that the purge removed exactly what had expired, every run's,
// and that this run's unexpired, held and blocked identities are all
// still there.
func (r *PrefillResult) check(o PrefillOptions, t liveTotals, before, after prefillCounts) {
	live := before.rows - int64(o.Rows)
	held := int64(2 * keptHeld)
	r.checkDetails = fmt.Sprintf("applied=%d other=%d live_rows=%d live_effects=%d seeded=%d removed=%d purgeable_before=%d purgeable_left=%d"+
		" expired_before=%d rows_left=%d/%d held_blocked_kept=%d/%d consumer_warnings=%d",
		t.applied, t.other, live, before.effects, o.Rows, r.Purge.Removed, before.purgeable, after.purgeable,
		before.expired, after.rows, before.rows-before.expired, after.kept, held, t.warns)
	r.CheckPassed = t.other == 0 && t.applied == live && before.effects == live && after.effects == live &&
		before.expired <= int64(o.Rows) && r.Purge.Removed == before.purgeable && after.purgeable == 0 &&
		after.rows == before.rows-before.expired && before.kept == held && after.kept == held
	if r.CheckPassed {
		r.Check = fmt.Sprintf("ok(%d_applied_once,%d_expired_purged,%d_unexpired_kept,%d_held_blocked_kept)",
			t.applied, r.Purge.Removed, after.rows, after.kept)
	} else {
		r.Check = "FAILED(see_the_check_line)"
	}
}
