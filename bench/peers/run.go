package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// Result is one system's run.
type Result struct {
	// System names the row; Settings says how it was configured.
	System, Settings string
	// Guarantee is what the system lacks next to seqbox.
	Guarantee string
	// Unique messages in the workload; Deliveries sent, re-sends included.
	Unique, Deliveries int
	// Published is the untimed publish phase; Consumed the timed one.
	Published, Consumed time.Duration
	// Effects is what the system's effects table holds afterwards.
	Effects effectCounts
	// Notes are the system's own counters.
	Notes string
}

// Rate is unique messages applied per second of consuming.
func (r Result) Rate() float64 {
	if r.Consumed <= 0 {
		return 0
	}
	return float64(r.Unique) / r.Consumed.Seconds()
}

// DupApplied is how many effect rows repeat an id: duplicates that got
// through.
func (r Result) DupApplied() int64 { return r.Effects.Rows - r.Effects.Distinct }

// Missing is how many unique messages have no effect row.
func (r Result) Missing() int64 { return int64(r.Unique) - r.Effects.Distinct }

// Run runs the workload on each system in o.Systems, one after the other,
// on o.DB, and prints the table and the final line to w.
func Run(ctx context.Context, o Options, w io.Writer) ([]Result, error) {
	if o.DB == "" {
		return nil, errors.New("no database: pass --db postgres://… or set SEQBOX_TEST_POSTGRES_URL")
	}
	if o.Messages <= 0 || o.Keys <= 0 || o.Dups < 0 {
		return nil, fmt.Errorf("bad workload: messages=%d keys=%d dups=%d", o.Messages, o.Keys, o.Dups)
	}
	admin, err := sql.Open("pgx", o.plainDB())
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	token := newToken()
	msgs := stream(o.Messages, o.Keys, o.Dups)
	fmt.Fprintf(w, "peers: %d unique messages over %d keys + %d re-sends of sent ids (%d deliveries); run %s\n",
		o.Messages, o.Keys, o.Dups, len(msgs), token)

	type job struct {
		name string
		run  func(schema string) (Result, error)
	}
	var jobs []job
	if o.runs("seqbox") {
		jobs = append(jobs, job{"seqbox", func(s string) (Result, error) { return runSeqbox(ctx, o, admin, s, msgs, false) }})
	}
	if o.runs("seqbox-batch") {
		jobs = append(jobs, job{"seqboxb", func(s string) (Result, error) { return runSeqbox(ctx, o, admin, s, msgs, true) }})
	}
	if o.runs("river") {
		jobs = append(jobs, job{"river", func(s string) (Result, error) { return runRiver(ctx, o, admin, s, msgs) }})
	}
	if o.runs("watermill") {
		jobs = append(jobs, job{"wm1", func(s string) (Result, error) { return runWatermill(ctx, o, admin, s, 1, msgs) }})
		if o.WatermillTopics > 1 {
			jobs = append(jobs, job{"wm" + strconv.Itoa(o.WatermillTopics), func(s string) (Result, error) {
				return runWatermill(ctx, o, admin, s, o.WatermillTopics, msgs)
			}})
		}
	}
	var out []Result
	for _, j := range jobs {
		schema := "peers_" + token + "_" + j.name
		r, err := j.run(schema)
		if dropErr := dropSchema(admin, schema); err == nil && dropErr != nil {
			err = fmt.Errorf("drop schema %s: %w", schema, dropErr)
		}
		if err != nil {
			return out, err
		}
		r.Unique, r.Deliveries = o.Messages, len(msgs)
		fmt.Fprintf(w, "%s done: %.0f msgs/s (%s)\n", r.System, r.Rate(), r.Notes)
		out = append(out, r)
	}
	report(w, out)
	return out, nil
}

// report prints the table, the settings and the final line.
func report(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tmsgs/s\tconsume_s\tpublish_s\tunique\teffect_rows\tdistinct_ids\tdup_applied\tmissing\twhat it lacks next to seqbox\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%.3f\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.System, r.Rate(), r.Consumed.Seconds(), r.Published.Seconds(),
			r.Unique, r.Effects.Rows, r.Effects.Distinct, r.DupApplied(), r.Missing(), r.Guarantee)
	}
	tw.Flush()
	for _, r := range rs {
		fmt.Fprintf(w, "settings %s: %s\n", r.System, r.Settings)
	}
	rate := map[string]int64{}
	for _, r := range rs {
		rate[r.System] = int64(r.Rate() + 0.5)
	}
	if r, ok := rate["seqbox-batch"]; ok {
		fmt.Fprintf(w, "peers: seqbox_batch_handler_msgs_per_s=%d (the same guarantees; effects written by a BatchHandler)\n", r)
	}
	fmt.Fprintf(w, "peers: seqbox_msgs_per_s=%d river_msgs_per_s=%d watermill_msgs_per_s=%d\n",
		rate["seqbox"], rate["river"], rate["watermill"])
}

// newToken is a short random name for this run's schemas.
func newToken() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
