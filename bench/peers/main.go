// Command peers runs one workload on seqbox, River and Watermill-sql, on
// the same PostgreSQL database in one run, and prints their throughput
// next to the guarantee each peer lacks.
//
// The workload: unique messages over business keys plus re-sends of
// already-sent ids. Every system writes one effect row per applied message
// in the transaction that marks the message done, each in a fresh schema of
// its own that is dropped afterwards. Publishing is untimed; the figure is
// unique messages applied per second of consuming.
//
//	go run . --db 'postgres://user@host/db'
//
// The last line is
// `peers: seqbox_msgs_per_s=A river_msgs_per_s=B watermill_msgs_per_s=C`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"
)

func main() {
	o := DefaultOptions()
	fl := flag.NewFlagSet("peers", flag.ContinueOnError)
	fl.StringVar(&o.DB, "db", os.Getenv("SEQBOX_TEST_POSTGRES_URL"), "PostgreSQL URL (default $SEQBOX_TEST_POSTGRES_URL)")
	fl.IntVar(&o.Messages, "messages", o.Messages, "unique messages")
	fl.IntVar(&o.Keys, "keys", o.Keys, "business keys the messages spread over")
	fl.IntVar(&o.Dups, "dups", o.Dups, "re-sends of already-sent ids")
	fl.IntVar(&o.SeqboxWorkers, "seqbox-workers", o.SeqboxWorkers, "seqbox Config.Workers")
	fl.IntVar(&o.SeqboxBatch, "seqbox-batch", o.SeqboxBatch, "seqbox Config.BatchSize")
	fl.IntVar(&o.RiverWorkers, "river-workers", o.RiverWorkers, "River QueueConfig.MaxWorkers")
	fl.IntVar(&o.RiverPool, "river-pool", o.RiverPool, "River's pgxpool MaxConns")
	fl.DurationVar(&o.RiverCooldown, "river-fetch-cooldown", o.RiverCooldown, "River Config.FetchCooldown")
	fl.DurationVar(&o.RiverPoll, "river-fetch-poll", o.RiverPoll, "River Config.FetchPollInterval")
	fl.IntVar(&o.WatermillBatch, "watermill-batch", o.WatermillBatch, "watermill-sql SubscribeBatchSize")
	fl.DurationVar(&o.WatermillPoll, "watermill-poll", o.WatermillPoll, "watermill-sql SubscriberConfig.PollInterval")
	fl.IntVar(&o.WatermillTopics, "watermill-topics", o.WatermillTopics, "also run Watermill over this many topics (0: don't)")
	systems := fl.String("systems", strings.Join(o.Systems, ","), "systems to run, comma-separated")
	cpuprofile := fl.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fl.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	o.Systems = strings.Split(*systems, ",")
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "peers:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := Run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// Options configure one run.
type Options struct {
	// DB is the PostgreSQL URL every system uses.
	DB string
	// Messages unique messages over Keys keys, plus Dups re-sends.
	Messages, Keys, Dups int
	// SeqboxWorkers and SeqboxBatch are Config.Workers and BatchSize.
	SeqboxWorkers, SeqboxBatch int
	// RiverWorkers is the default queue's MaxWorkers; RiverPool the pgx
	// pool's size.
	RiverWorkers, RiverPool int
	// RiverCooldown and RiverPoll are FetchCooldown and FetchPollInterval.
	RiverCooldown, RiverPoll time.Duration
	// WatermillBatch is SubscribeBatchSize; WatermillPoll the
	// subscriber's PollInterval.
	WatermillBatch int
	WatermillPoll  time.Duration
	// WatermillTopics, above 1, adds a Watermill run over that many
	// topics.
	WatermillTopics int
	// Systems to run, of seqbox, seqbox-batch (effects by a BatchHandler),
	// river and watermill.
	Systems []string
	// Stall fails a system that makes no progress for this long.
	Stall time.Duration
}

// DefaultOptions is the full workload with the settings the README
// explains.
func DefaultOptions() Options {
	return Options{
		Messages: 10_000, Keys: 100, Dups: 1_000,
		SeqboxWorkers: 2, SeqboxBatch: 1024,
		RiverWorkers: 50, RiverPool: 60, RiverCooldown: 20 * time.Millisecond, RiverPoll: 50 * time.Millisecond,
		WatermillBatch: 1000, WatermillPoll: 10 * time.Millisecond, WatermillTopics: 8,
		Systems: []string{"seqbox", "seqbox-batch", "river", "watermill"},
		Stall:   60 * time.Second,
	}
}

// plainDB is DB without seqbox's seqbox_schema parameter, for pgx.
func (o Options) plainDB() string { return withoutParam(o.DB, "seqbox_schema") }

// runs reports whether system is to run.
func (o Options) runs(system string) bool {
	for _, s := range o.Systems {
		if strings.TrimSpace(s) == system {
			return true
		}
	}
	return false
}
