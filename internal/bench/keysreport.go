package bench

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
)

// printKeys prints the key sweep: a row per case, the million-key run's
// resident set, and what bounds it.
func printKeys(ctx context.Context, w io.Writer, e *env, rows []keyRow, workers, batch int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "keys\tspread\tmessages\tseconds\tmsgs/s\tp50_ms\tp99_ms\trss_peak_mb\trss_increase_mb\tnote\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.3f\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n", r.keys, r.spread(), r.n, r.elapsed.Seconds(),
			rate(int64(r.n), r.elapsed), ms(r.lat.P50, r.lat.N), ms(r.lat.P99, r.lat.N),
			r.rss.mb(r.rss.Peak), r.rss.mb(r.rss.Increase()), r.note)
	}
	tw.Flush()
	fmt.Fprintf(w, "keys: seqbox end to end, %d workers, batch %d, the messages queued beforehand; p50/p99 = receive→commit at"+
		" full speed (it includes the wait behind up to %d deliveries in flight); rss per row = this process during that run\n",
		workers, batch, inFlight(workers, batch))
	for _, r := range rows {
		if r.keys != millionKeys || r.zipfS > 0 {
			continue
		}
		fmt.Fprintf(w, "rss: keys=%d messages=%d peak_mb=%s baseline_mb=%s increase_mb=%s source=%q\n", r.keys, r.n,
			r.rss.mb(r.rss.Peak), r.rss.mb(r.rss.Base), r.rss.mb(r.rss.Increase()), r.rss.Source())
	}
	fmt.Fprintln(w, "rss bounds: "+bounds(ctx, e, workers, batch))
}

// inFlight is the most deliveries Consumer.Run holds: the scheduler's
// limit (Workers × BatchSize × 2) plus the one Receive it may have
// started below the limit.
func inFlight(workers, batch int) int { return workers*batch*2 + batch }

// bounds says what bounds the consumer's memory, with the database's
// figures read from the database itself.
func bounds(ctx context.Context, e *env, workers, batch int) string {
	s := fmt.Sprintf("the consumer holds at most %d received deliveries (Workers×BatchSize×2 + one Receive of %d) and no"+
		" per-key state: a key's entry leaves the scheduler once its queue is empty, and the key state lives in seqbox_keys;",
		inFlight(workers, batch), batch)
	db := e.st.DB()
	if e.pg {
		var sb string
		if err := db.QueryRowContext(ctx, `SHOW shared_buffers`).Scan(&sb); err != nil {
			sb = "?"
		}
		return s + fmt.Sprintf(" PostgreSQL caches the table in the server (shared_buffers=%s), not here; the store's pool"+
			" holds at most %d connections; the bench adds one 32-byte latency sample per message", sb, db.Stats().MaxOpenConnections)
	}
	var cache, mmap int64
	if err := db.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&cache); err != nil {
		return s + " SQLite cache_size unreadable: " + err.Error()
	}
	if err := db.QueryRowContext(ctx, `PRAGMA mmap_size`).Scan(&mmap); err != nil {
		return s + " SQLite mmap_size unreadable: " + err.Error()
	}
	per := fmt.Sprintf("%d pages", cache)
	if cache < 0 {
		per = fmt.Sprintf("%d KiB", -cache)
	}
	return s + fmt.Sprintf(" SQLite's page cache is cache_size=%d (%s) per connection and mmap_size=%d, whatever the table's size;"+
		" the store's pool keeps %d connections open now (idle ones close past 2), the queue has a pool of its own;"+
		" the bench adds one 32-byte latency sample per message", cache, per, mmap, db.Stats().OpenConnections)
}
