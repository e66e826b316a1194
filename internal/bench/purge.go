package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
)

// keptHeld is how many expired identities the purge bench parks as held:
// retention must never remove them.
const keptHeld = 100

// PurgeOptions configure `seqbox bench purge`.
type PurgeOptions struct {
	// DB is a SQLite path or a postgres:// URL.
	DB string
	// Rows is how many expired identities are seeded for the purge.
	Rows int
	// Batch is the purge batch: identities per purge transaction.
	Batch int
	// Workers, ConsumerBatch: the live consumer's Config.Workers and
	// Config.BatchSize.
	Workers, ConsumerBatch int
	// Keys is how many partition keys the live stream spreads over.
	Keys int
	// Warmup is how long the consumer runs, after its first commit, before
	// the baseline window starts.
	Warmup time.Duration
	// Baseline is how long the consumer is measured before the purge.
	Baseline time.Duration
	// Rate is the live stream in messages per second; 0 keeps a backlog so
	// the consumer runs flat out.
	Rate int
}

// PurgeResult is what the purge bench measured.
type PurgeResult struct {
	// Removed is what Consumer.Purge reported removing; Elapsed is how
	// long it ran.
	Removed int64
	Elapsed time.Duration
	// Batches are the durations of the purge's transactions.
	Batches Latency
	// Baseline and During are the live consumer before and during the
	// purge.
	Baseline, During Mode
	// BaselineBegin and DuringBegin are the consumer's store.Begin calls
	// in each window: on SQLite, its wait for the write lock.
	BaselineBegin, DuringBegin Latency
}

// Purge seeds Rows expired identities for the bench consumer, starts
// Consumer.Run on a live stream, measures it for Baseline, then runs
// Consumer.Purge (clock one hour ahead) while the consumer keeps going,
// and compares the consumer during the purge with the baseline. It fails
// unless exactly the expired identities are gone and every live and held
// one is still there.
func Purge(ctx context.Context, o PurgeOptions, w io.Writer) (PurgeResult, error) {
	var res PurgeResult
	run := newRun()
	e, err := open(ctx, o.DB, "bench-"+run)
	if err != nil {
		return res, err
	}
	defer e.close()
	seedSrc, heldSrc, liveSrc := "bench-seed-"+run, "bench-held-"+run, "bench-live-"+run
	held := min(keptHeld, o.Rows)
	clock := func() time.Time { return time.Now().Add(time.Hour) }

	fmt.Fprintf(w, "seqbox bench purge  db=%s rows=%d purge_batch=%d workers=%d consumer_batch=%d keys=%d load=%s warmup=%s\n",
		e.where, o.Rows, o.Batch, o.Workers, o.ConsumerBatch, o.Keys, loadName(o.Rate), o.Warmup)
	expired := time.Now().Add(-24 * time.Hour)
	t0 := time.Now()
	if err := seed(ctx, e, seedSrc, "applied", o.Rows, expired); err != nil {
		return res, err
	}
	seedTime := time.Since(t0)
	if err := seed(ctx, e, heldSrc, "held", held, expired); err != nil {
		return res, err
	}
	note, err := afterBulkLoad(ctx, e)
	if err != nil {
		return res, err
	}
	before, err := countInbox(ctx, e, clock(), seedSrc, heldSrc, liveSrc)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(w, "seed: %d expired identities in %.3fs (%.0f rows/s), plus %d expired held%s\n",
		o.Rows, seedTime.Seconds(), rate(int64(o.Rows), seedTime), held, note)

	times := &purgeTimes{}
	purger, err := newPurger(e, clock, times)
	if err != nil {
		return res, err
	}
	l, err := startLive(ctx, e, o.Workers, o.ConsumerBatch)
	if err != nil {
		return res, err
	}
	f := startFeed(ctx, e.q, liveSrc, run, o, l.rec)

	werr := l.waitApplied(ctx, 1)
	if werr == nil {
		sleepCtx(ctx, o.Warmup)
	}
	b0 := time.Now()
	if werr == nil {
		sleepCtx(ctx, o.Baseline)
	}
	b1 := time.Now()
	var perr error
	if werr == nil {
		res.Removed, perr = purger.Purge(ctx, o.Batch)
	}
	p1 := time.Now()
	failures, firstFailure := f.stop()
	stopErr := l.stop()
	switch {
	case werr != nil:
		return res, werr
	case perr != nil:
		return res, fmt.Errorf("purge: %w", perr)
	case stopErr != nil:
		return res, fmt.Errorf("consumer: %w", stopErr)
	}
	res.Elapsed = p1.Sub(b1)
	res.Batches = LatencyOf(times.all())
	n, lats := l.rec.window(b0, b1)
	res.Baseline = Mode{Messages: n, Elapsed: b1.Sub(b0), Latency: LatencyOf(lats)}
	n, lats = l.rec.window(b1, p1)
	res.During = Mode{Messages: n, Elapsed: p1.Sub(b1), Latency: LatencyOf(lats)}
	res.BaselineBegin = LatencyOf(l.rec.beginWindow(b0, b1))
	res.DuringBegin = LatencyOf(l.rec.beginWindow(b1, p1))
	printPurge(w, res, times.all())
	fmt.Fprintf(w, "live stream: published=%d publish_failures=%d\n", f.published.Load(), failures)
	if failures > 0 {
		fmt.Fprintf(w, "publish failure (first of %d): %s\n", failures, firstFailure)
	}

	after, err := countInbox(ctx, e, clock(), seedSrc, heldSrc, liveSrc)
	if err != nil {
		return res, err
	}
	warns, first := l.warn.summary()
	return res, checkPurge(w, res, before, after, int64(held), l.rec.applied.Load(), warns, first)
}

// newPurger is the bench consumer for its retention purge (Consumer.Purge,
// as `seqbox purge` runs it) at clock, its purge batches timed in times.
func newPurger(e *env, clock func() time.Time, times *purgeTimes) (*seqbox.Consumer, error) {
	return seqbox.NewConsumer(seqbox.Config{Name: Consumer, Store: timedStore{Store: e.st, times: times},
		Handler: replay.RecordHandlerOn(e.st.DB(), Consumer), Now: clock,
		// The bench prints what it removed; the purge's own line would repeat it.
		Logger: slog.New(slog.DiscardHandler)})
}

// afterBulkLoad does, untimed, what the database would do on its own soon after
// a bulk load, so that it does not land in the baseline window: a WAL
// checkpoint on SQLite; VACUUM ANALYZE and a checkpoint on PostgreSQL. It
// returns a note for the seed line.
func afterBulkLoad(ctx context.Context, e *env) (string, error) {
	db := e.st.DB()
	if !e.pg {
		if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			return "", fmt.Errorf("checkpoint: %w", err)
		}
		return ", then wal_checkpoint(TRUNCATE)", nil
	}
	if _, err := db.ExecContext(ctx, `VACUUM (ANALYZE) seqbox_inbox`); err != nil {
		return "", fmt.Errorf("vacuum: %w", err)
	}
	if _, err := db.ExecContext(ctx, `CHECKPOINT`); err != nil {
		return ", then VACUUM (ANALYZE) seqbox_inbox (CHECKPOINT not permitted)", nil
	}
	return ", then VACUUM (ANALYZE) seqbox_inbox and CHECKPOINT", nil
}

func loadName(r int) string {
	if r <= 0 {
		return "saturated"
	}
	return fmt.Sprintf("%d/s", r)
}

// printPurge prints the baseline and purge windows and the purge figures.
func printPurge(w io.Writer, res PurgeResult, batches []time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "window\tseconds\tapplied\tmsgs/s\tp50_ms\tp99_ms\tmax_ms\tbegin_p99_ms\tbegin_max_ms\t")
	for _, m := range []struct {
		name  string
		m     Mode
		begin Latency
	}{{"baseline", res.Baseline, res.BaselineBegin}, {"purge", res.During, res.DuringBegin}} {
		fmt.Fprintf(tw, "%s\t%.3f\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n", m.name, m.m.Elapsed.Seconds(), m.m.Messages,
			rate(m.m.Messages, m.m.Elapsed), ms(m.m.Latency.P50, m.m.Latency.N), ms(m.m.Latency.P99, m.m.Latency.N),
			ms(m.m.Latency.Max, m.m.Latency.N), ms(m.begin.P99, m.begin.N), ms(m.begin.Max, m.begin.N))
	}
	tw.Flush()
	fmt.Fprintln(w, "latency: p50/p99/max = receive→commit per message; begin = the consumer's store.Begin per batch (SQLite: the wait for the write lock)")
	printPurgeLine(w, res, batches)
	fmt.Fprintf(w, "during purge vs baseline: throughput x%.2f, p99 receive→commit x%.2f\n",
		ratio(rate(res.During.Messages, res.During.Elapsed), rate(res.Baseline.Messages, res.Baseline.Elapsed)),
		ratio(float64(res.During.Latency.P99), float64(res.Baseline.Latency.P99)))
}

// printPurgeLine prints what the purge removed, how fast, and its
// batches' durations: whether they slow down as it advances.
func printPurgeLine(w io.Writer, res PurgeResult, batches []time.Duration) {
	first, last := tenths(batches)
	fmt.Fprintf(w, "purge: removed=%d seconds=%.3f rows/s=%.0f batches=%d batch_p50_ms=%s batch_p99_ms=%s batch_max_ms=%s first10pct_batch_ms=%s last10pct_batch_ms=%s\n",
		res.Removed, res.Elapsed.Seconds(), rate(res.Removed, res.Elapsed), res.Batches.N,
		ms(res.Batches.P50, res.Batches.N), ms(res.Batches.P99, res.Batches.N), ms(res.Batches.Max, res.Batches.N),
		ms(first, len(batches)), ms(last, len(batches)))
}

// tenths returns the mean of the first and of the last tenth of ds (at
// least one each), in order: whether batches slow down as the purge
// advances.
func tenths(ds []time.Duration) (first, last time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	k := max(1, len(ds)/10)
	mean := func(xs []time.Duration) time.Duration {
		var s time.Duration
		for _, x := range xs {
			s += x
		}
		return s / time.Duration(len(xs))
	}
	return mean(ds[:k]), mean(ds[len(ds)-k:])
}

// checkPurge requires that the purge removed exactly what had expired and
// kept every held and live identity (applied is how many live messages
// the consumer applied), and prints the check line.
func checkPurge(w io.Writer, res PurgeResult, before, after inboxCounts, held, applied int64, warns int, first string) error {
	line := fmt.Sprintf("removed=%d purgeable_before=%d expired_left=%d purgeable_left=%d held_kept=%d/%d live_rows=%d live_applied=%d live_effects=%d consumer_warnings=%d",
		res.Removed, before.Purgeable, after.Seeded, after.Purgeable, after.Held, held, after.Live, applied, after.LiveEffects, warns)
	if warns > 0 {
		fmt.Fprintf(w, "consumer warning (first of %d): %s\n", warns, first)
	}
	// Every live identity has exactly one effect. The consumer may have
	// applied more than it reported: a batch whose COMMIT went through as
	// the bench stopped the consumer returns an error to it all the same.
	if res.Removed != before.Purgeable || after.Seeded != 0 || after.Purgeable != 0 || after.Held != held ||
		after.Live == 0 || after.Live < applied || after.LiveEffects != after.Live {
		fmt.Fprintln(w, "check: "+line+" FAILED")
		return fmt.Errorf("bench purge: check failed: %s", line)
	}
	fmt.Fprintln(w, "check: "+line+" ok")
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
