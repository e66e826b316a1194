package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
)

// ThroughputOptions configure `seqbox bench throughput`.
type ThroughputOptions struct {
	// DB is a SQLite path or a postgres:// URL.
	DB string
	// Messages is how many messages the raw limit and Consumer.Run write.
	Messages int
	// Keys is how many partition keys the messages spread over.
	Keys int
	// Batch is rows per raw transaction and Config.BatchSize.
	Batch int
	// Workers is raw writers at a time and Config.Workers.
	Workers int
	// Deliver is how many messages the one-per-transaction mode delivers
	// (0: Messages/10, at least 1).
	Deliver int
}

// Mode is what one way of writing the messages measured.
type Mode struct {
	// Messages were written (applied) in Elapsed.
	Messages int64
	Elapsed  time.Duration
	// Latency is per message; what it spans depends on the mode.
	Latency Latency
}

// ThroughputResult holds the three modes, measured in one run.
type ThroughputResult struct {
	Raw, Run, Deliver Mode
}

// Throughput measures, on one database in one run: the raw limit (plain
// INSERTs in batches), Consumer.Run end to end on the embedded queue (the
// messages published beforehand, untimed), and Deliver with one message
// per transaction. It prints a table and a check line to w, and fails when
// a message was not applied exactly once.
func Throughput(ctx context.Context, o ThroughputOptions, w io.Writer) (ThroughputResult, error) {
	var res ThroughputResult
	if o.Deliver <= 0 {
		o.Deliver = max(1, o.Messages/10)
	}
	run := newRun()
	e, err := open(ctx, o.DB, "bench-"+run)
	if err != nil {
		return res, err
	}
	defer e.close()
	bodies := Bodies("bench", run+"-r", run, o.Messages, o.Keys)

	raw, err := RawInsert(ctx, e.st.DB(), e.pg, run, bodies, o.Batch, o.Workers)
	if err != nil {
		return res, err
	}
	res.Raw = Mode{Messages: raw.Rows, Elapsed: raw.Elapsed, Latency: raw.Latency}

	if err := publish(ctx, e.q, bodies); err != nil {
		return res, err
	}
	l, err := startLive(ctx, e, o.Workers, o.Batch)
	if err != nil {
		return res, err
	}
	waitErr := l.waitApplied(ctx, int64(o.Messages))
	stopErr := l.stop()
	res.Run.Elapsed = time.Since(l.start)
	if waitErr != nil {
		return res, waitErr
	}
	if stopErr != nil {
		return res, fmt.Errorf("consumer: %w", stopErr)
	}
	n, lats := l.rec.window(time.Time{}, time.Now())
	res.Run.Messages, res.Run.Latency = n, LatencyOf(lats)

	dres, err := deliverEach(ctx, e, Bodies("bench", run+"-d", run+"d", o.Deliver, o.Keys), o.Keys, o.Workers)
	if err != nil {
		return res, err
	}
	res.Deliver = dres

	fmt.Fprintf(w, "seqbox bench throughput  db=%s messages=%d keys=%d batch=%d workers=%d deliver_messages=%d\n",
		e.where, o.Messages, o.Keys, o.Batch, o.Workers, o.Deliver)
	printModes(w, res)
	return res, checkThroughput(ctx, e, run, o, res, l, w)
}

// printModes prints the side-by-side table.
func printModes(w io.Writer, res ThroughputResult) {
	raw := rate(res.Raw.Messages, res.Raw.Elapsed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\tmessages\tseconds\tmsgs/s\tp50_ms\tp99_ms\tmax_ms\tvs_raw\t")
	for _, m := range []struct {
		name string
		m    Mode
	}{{"raw-insert", res.Raw}, {"seqbox-run", res.Run}, {"seqbox-deliver", res.Deliver}} {
		r := rate(m.m.Messages, m.m.Elapsed)
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.0f\t%s\t%s\t%s\t%.3f\t\n", m.name, m.m.Messages, m.m.Elapsed.Seconds(), r,
			ms(m.m.Latency.P50, m.m.Latency.N), ms(m.m.Latency.P99, m.m.Latency.N), ms(m.m.Latency.Max, m.m.Latency.N), ratio(r, raw))
	}
	tw.Flush()
	fmt.Fprintln(w, "latency: raw-insert = its transaction, begin→commit; seqbox-run = receive→commit;"+
		" seqbox-deliver = one Deliver call (one transaction)")
	fmt.Fprintf(w, "batching: seqbox-run/seqbox-deliver = %.1fx\n",
		ratio(rate(res.Run.Messages, res.Run.Elapsed), rate(res.Deliver.Messages, res.Deliver.Elapsed)))
}

// checkThroughput requires every message applied exactly once and the
// queue drained, and prints the check line.
func checkThroughput(ctx context.Context, e *env, run string, o ThroughputOptions, res ThroughputResult, l *live, w io.Writer) error {
	effects := func(prefix string) (int64, error) {
		var n int64
		err := e.st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_record_effects WHERE consumer = $1 AND id LIKE $2`,
			Consumer, prefix+"%").Scan(&n)
		return n, err
	}
	runEffects, err := effects(run + "-r")
	if err != nil {
		return err
	}
	deliverEffects, err := effects(run + "-d")
	if err != nil {
		return err
	}
	ready, leased, err := e.q.Depth(ctx)
	if err != nil {
		return err
	}
	warns, _ := l.warn.summary()
	line := fmt.Sprintf("raw_rows=%d run_applied=%d run_other=%d run_effects=%d queue_left=%d deliver_applied=%d deliver_effects=%d consumer_warnings=%d",
		res.Raw.Messages, l.rec.applied.Load(), l.rec.other.Load(), runEffects, ready+leased, res.Deliver.Messages, deliverEffects, warns)
	want := int64(o.Messages)
	if res.Raw.Messages != want || l.rec.applied.Load() != want || l.rec.other.Load() != 0 || runEffects != want ||
		ready+leased != 0 || res.Deliver.Messages != int64(o.Deliver) || deliverEffects != int64(o.Deliver) {
		fmt.Fprintln(w, "check: "+line+" FAILED")
		return fmt.Errorf("bench throughput: check failed: %s%s", line, l.warnText())
	}
	fmt.Fprintln(w, "check: "+line+" ok")
	return nil
}

// deliverEach runs bodies through Consumer.Deliver, one message per
// transaction, workers at a time; each worker owns whole keys and delivers
// them in order.
func deliverEach(ctx context.Context, e *env, bodies [][]byte, keys, workers int) (Mode, error) {
	c, err := seqbox.NewConsumer(seqbox.Config{Name: Consumer, Store: e.st, Handler: replay.RecordHandlerOn(e.st.DB(), Consumer)})
	if err != nil {
		return Mode{}, err
	}
	var mu sync.Mutex
	var lats []time.Duration
	errs := make(chan error, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for wk := range workers {
		wg.Go(func() {
			for i, b := range bodies {
				if (i%keys)%workers != wk {
					continue
				}
				t0 := time.Now()
				results, err := c.Deliver(ctx, b, 1)
				if err == nil && results[0].Outcome != seqboxtype.Applied {
					err = fmt.Errorf("deliver %s: outcome %s (%s), want applied", results[0].ID, results[0].Outcome, results[0].Reason)
				}
				if err != nil {
					errs <- err
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lats = append(lats, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return Mode{}, err
	}
	return Mode{Messages: int64(len(lats)), Elapsed: elapsed, Latency: LatencyOf(lats)}, nil
}
