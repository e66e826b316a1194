package bench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/seqbox/seqbox"
)

// SummaryOptions configure `seqbox bench` (docs/design.md §17).
type SummaryOptions struct {
	// DB is a SQLite path or a postgres:// URL.
	DB string
	// Quick sizes the run to finish in well under a minute.
	Quick bool
	// Scratch says the database is thrown away after the run, so the run
	// need not remove what it seeded.
	Scratch bool
	// OnPhase, when set, is called as each phase of the run starts, as
	// it moves to its next step, and as it ends (for a progress line).
	OnPhase func(Phase)
}

// Phase is where a Summary run stands: one of its phases, started,
// at a step, or done.
type Phase struct {
	// Name is the phase: "raw limit", "seqbox end to end", "naive",
	// "latency at half rate" or "seqbox over 1 to 1,000,000 keys"; in
	// a prefill run, "empty inbox", "seed", "full inbox" or "purge".
	Name string
	// Step is what the phase runs now, when it has steps.
	Step string
	// Done is set once the phase ended; Result is then what it measured.
	Done   bool
	Result string
	// Elapsed is the phase's time so far.
	Elapsed time.Duration
}

// phase reports one phase of a Summary run to o.OnPhase.
type phase struct {
	o     SummaryOptions
	name  string
	start time.Time
}

func (o SummaryOptions) phase(name string) *phase {
	p := &phase{o: o, name: name, start: time.Now()}
	p.step("")
	return p
}

func (p *phase) report(ph Phase) {
	if p.o.OnPhase != nil {
		ph.Name, ph.Elapsed = p.name, time.Since(p.start)
		p.o.OnPhase(ph)
	}
}

func (p *phase) step(step string) { p.report(Phase{Step: step}) }

func (p *phase) done(format string, args ...any) {
	p.report(Phase{Done: true, Result: fmt.Sprintf(format, args...)})
}

// Summary is one run, side by side on one database: the raw limit (the
// rows seqbox writes per message, as plain batched INSERTs and upserts,
// the best rate over batch sizes and writers), seqbox end to end
// (embedded queue → inbox → gate → effect → COMMIT → ack) with the record
// handler as a per-message Handler and again as a BatchHandler (its
// effects as multi-row statements, as the raw limit writes them), and the seed's
// naive design (query, effect, marker; one transaction per message). It
// then runs seqbox (Handler) at 10%, 50% and 90% of its measured rate and takes the
// p50 and p99 from receive to commit. Before the side-by-side table it prints seqbox end
// to end over 1, 100, 10,000 and 1,000,000 keys (the last on key rows
// created in bulk beforehand) and over a Zipf hot-key spread, with the
// resident set of each run. Its last line is
// `bench: ratio_vs_raw=X ratio_vs_naive=Y msgs_per_s=Z p99_ms=W`.
func Summary(ctx context.Context, o SummaryOptions, w io.Writer) error {
	n, naiveN, keys, workers := 20000, 2000, 100, 4
	half := 10 * time.Second
	if o.Quick {
		n, naiveN, half = 5000, 500, 4*time.Second
	}
	run := newRun()
	e, err := open(ctx, o.DB, "bench-"+run)
	if err != nil {
		return err
	}
	defer e.close()
	batch := seqbox.DefaultBatchSize
	fmt.Fprintf(w, "seqbox bench  db=%s messages=%d keys=%d quick=%v\n", e.where, n, keys, o.Quick)

	ph := o.phase("raw limit")
	raw, rawHow, err := rawLimit(ctx, e, run, n, keys, ph.step)
	if err != nil {
		return err
	}

	ph.done("%.0f msgs/s, best of %s", raw, rawHow)

	ph = o.phase("seqbox end to end")
	seqboxRate, err := maxRate(ctx, e, run+"s", n, keys, workers, batch)
	if err != nil {
		return err
	}
	ph.done("%.0f msgs/s over %d messages", seqboxRate, n)

	ph = o.phase("seqbox end to end, BatchHandler")
	e.bulk = true
	bulkRate, err := maxRate(ctx, e, run+"b", n, keys, workers, batch)
	e.bulk = false
	if err != nil {
		return err
	}
	ph.done("%.0f msgs/s over %d messages", bulkRate, n)

	ph = o.phase("naive")

	naive, err := naiveRate(ctx, e.st.DB(), run, Bodies("bench", run+"-n", run+"n", naiveN, keys), workers)
	if err != nil {
		return err
	}

	ph.done("%.0f msgs/s over %d messages", naive, naiveN)

	// Latency at 10%, 50% and 90% of the measured maximum; the last line
	// reports the p99 at half.
	type atLoad struct {
		name   string
		target int
		atRateResult
	}
	loads := []atLoad{{name: "seqbox@10%", target: int(seqboxRate / 10)}, {name: "seqbox@half", target: int(seqboxRate / 2)},
		{name: "seqbox@90%", target: int(seqboxRate * 9 / 10)}}
	for i := range loads {
		ph = o.phase("latency at " + strings.TrimPrefix(loads[i].name, "seqbox@") + " rate")
		d := half
		if o.Quick && loads[i].name != "seqbox@half" {
			d = 3 * time.Second
		}
		loads[i].atRateResult, err = atRate(ctx, e, fmt.Sprintf("%sh%d", run, i), max(1, loads[i].target), keys, workers, batch, d)
		if err != nil {
			return err
		}
		ph.done("p99 %s ms at %.0f msgs/s", ms(loads[i].lat.P99, loads[i].lat.N), loads[i].got)
	}
	lat := loads[1].lat

	ph = o.phase("seqbox over 1 to 1,000,000 keys")
	sweep, err := keySweep(ctx, e, run, o, workers, batch)
	if err != nil {
		return err
	}
	ph.done("%d spreads of keys", len(sweep))
	printKeys(ctx, w, e, sweep, workers, batch)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\tmsgs/s\tnote\t")
	fmt.Fprintf(tw, "raw-limit\t%.0f\tthe rows seqbox writes per message (inbox, key, effect, object), best of %s\t\n", raw, rawHow)
	fmt.Fprintf(tw, "seqbox\t%.0f\tembedded queue → inbox → gate → effect → COMMIT → ack, %d workers, batch %d\t\n", seqboxRate, workers, batch)
	fmt.Fprintf(tw, "seqbox-batch\t%.0f\tthe same with the effects written by a BatchHandler, a multi-row statement per table per batch as the raw limit writes them: %.3f of the raw limit\t\n",
		bulkRate, ratio(bulkRate, raw))
	fmt.Fprintf(tw, "naive\t%.0f\tquery, effect, marker: one transaction per message, %d writers\t\n", naive, workers)
	for _, l := range loads {
		fmt.Fprintf(tw, "%s\t%.0f\ttarget %d msgs/s; receive→commit p50 %s ms, p99 %s ms over %d messages; publish→commit p50 %s ms, p99 %s ms\t\n",
			l.name, l.got, l.target, ms(l.lat.P50, l.lat.N), ms(l.lat.P99, l.lat.N), l.lat.N, ms(l.e2e.P50, l.e2e.N), ms(l.e2e.P99, l.e2e.N))
	}
	tw.Flush()
	fmt.Fprintf(w, "bench: ratio_vs_raw=%.3f ratio_vs_naive=%.2f msgs_per_s=%.0f p99_ms=%s\n",
		ratio(seqboxRate, raw), ratio(seqboxRate, naive), seqboxRate, ms(lat.P99, lat.N))
	return nil
}

// maxRate publishes n messages of stream run beforehand (untimed) and
// returns the rate at which seqbox applies them, end to end.
func maxRate(ctx context.Context, e *env, run string, n, keys, workers, batch int) (float64, error) {
	r, err := saturated(ctx, e, Bodies("bench", run+"-", run, n, keys), workers, batch)
	return rate(int64(n), r.Elapsed), err
}

// saturatedResult is what saturated measured: the messages applied
// (Messages) from the consumer's start to the last one's commit, with
// their receive→commit latencies, and the consumer's other outcomes and
// warnings.
type saturatedResult struct {
	Mode
	other int64
	warns int
}

// saturated publishes bodies beforehand (untimed), then consumes them
// with a consumer of its own and measures it until all are applied.
func saturated(ctx context.Context, e *env, bodies [][]byte, workers, batch int) (saturatedResult, error) {
	var r saturatedResult
	if err := publish(ctx, e.q, bodies); err != nil {
		return r, err
	}
	l, err := startLive(ctx, e, workers, batch)
	if err != nil {
		return r, err
	}
	waitErr := l.waitApplied(ctx, int64(len(bodies)))
	r.Elapsed = time.Since(l.start)
	if err := stopLive(l, waitErr); err != nil {
		return r, err
	}
	_, lats := l.rec.window(time.Time{}, time.Now())
	r.Messages, r.Latency, r.other = l.rec.applied.Load(), LatencyOf(lats), l.rec.other.Load()
	r.warns, _ = l.warn.summary()
	return r, nil
}

// stopLive stops a consumer, preferring the error that stopped the wait.
func stopLive(l *live, waitErr error) error {
	stopErr := l.stop()
	if waitErr != nil {
		return waitErr
	}
	if stopErr != nil {
		return fmt.Errorf("consumer: %w", stopErr)
	}
	return nil
}

// naiveSchema is the seed's fragile design: a marker table consulted
// before the effect and written after it.
const naiveSchema = `CREATE TABLE IF NOT EXISTS bench_naive_marker (run TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (run, id));
CREATE TABLE IF NOT EXISTS bench_naive_effects (run TEXT NOT NULL, id TEXT NOT NULL)`

// naiveRate runs the naive design over bodies, one transaction per
// message, workers at a time, and returns messages per second.
func naiveRate(ctx context.Context, db *sql.DB, run string, bodies [][]byte, workers int) (float64, error) {
	for _, stmt := range splitSQL(naiveSchema) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return 0, fmt.Errorf("naive: create tables: %w", err)
		}
	}
	elapsed, err := inParallel(len(bodies), 1, workers, func(i, _ int) error {
		return naiveOne(ctx, db, run, idOf(bodies[i]))
	})
	if err != nil {
		return 0, fmt.Errorf("naive: %w", err)
	}
	for _, t := range []string{"bench_naive_marker", "bench_naive_effects"} {
		if _, err := db.ExecContext(ctx, `DELETE FROM `+t+` WHERE run = $1`, run); err != nil {
			return 0, fmt.Errorf("naive: clean up: %w", err)
		}
	}
	return rate(int64(len(bodies)), elapsed), nil
}

func naiveOne(ctx context.Context, db *sql.DB, run, id string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	var seen int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM bench_naive_marker WHERE run = $1 AND id = $2`, run, id).Scan(&seen); err != nil {
		return err
	}
	if seen > 0 {
		return tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO bench_naive_effects (run, id) VALUES ($1, $2)`, run, id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO bench_naive_marker (run, id) VALUES ($1, $2)`, run, id); err != nil {
		return err
	}
	return tx.Commit()
}

// atRateResult is what atRate measured: the receive→commit and the
// publish→commit latencies of the messages that committed in the window,
// and the rate applied; and, over the whole run, the messages applied,
// the other outcomes and the consumer's warnings.
type atRateResult struct {
	lat, e2e Latency
	got      float64
	applied  int64
	other    int64
	warns    int
}

// atRate feeds the queue at target messages per second for d (after a
// second of warm-up) while seqbox consumes it, and returns the receive →
// commit and publish→commit latencies of the messages that committed in
// that window and the rate applied.
func atRate(ctx context.Context, e *env, run string, target, keys, workers, batch int, d time.Duration) (atRateResult, error) {
	source := "bench-" + run
	return atRateOf(ctx, e, func(i int) []byte { return Body(source, "l", run+"l", i, keys) }, target, workers, batch, d)
}

// atRateOf is atRate on the stream body(0), body(1), ...
func atRateOf(ctx context.Context, e *env, body func(i int) []byte, target, workers, batch int, d time.Duration) (atRateResult, error) {
	l, err := startLive(ctx, e, workers, batch)
	if err != nil {
		return atRateResult{}, err
	}
	f := startFeedOf(ctx, e.q, body, PurgeOptions{Rate: target, Workers: workers, ConsumerBatch: batch}, l.rec)
	sleepCtx(ctx, time.Second)
	from := time.Now()
	sleepCtx(ctx, d)
	to := time.Now()
	failures, first := f.stop()
	published := f.published.Load()
	waitErr := l.waitApplied(ctx, published)
	if waitErr == nil {
		// A publish that the stop cut off may have committed without
		// being counted: drain the queue, so that nothing of this phase
		// is left for the next one's consumer.
		waitErr = l.waitDrained(ctx, e.q)
	}
	if err := stopLive(l, waitErr); err != nil {
		return atRateResult{}, err
	}
	if failures > 0 {
		return atRateResult{}, fmt.Errorf("feed: %d publishes failed, first: %s", failures, first)
	}
	n, lats := l.rec.window(from, to)
	warns, _ := l.warn.summary()
	return atRateResult{lat: LatencyOf(lats), e2e: LatencyOf(l.rec.e2eWindow(from, to)), got: rate(n, to.Sub(from)),
		applied: l.rec.applied.Load(), other: l.rec.other.Load(), warns: warns}, ctx.Err()
}

// splitSQL splits a schema on ";" into its statements.
func splitSQL(schema string) []string {
	var out []string
	for _, s := range strings.Split(schema, ";") {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}

// inParallel runs work over [0, n) in chunks of step, on workers
// goroutines taking the next chunk as they finish, and returns how long
// it took and the first error (which stops its worker).
func inParallel(n, step, workers int, work func(from, to int) error) (time.Duration, error) {
	var next atomic.Int64
	errs := make(chan error, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				from := int(next.Add(int64(step))) - step
				if from >= n {
					return
				}
				if err := work(from, min(from+step, n)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	return elapsed, <-errs
}
