// Package demo runs the inbox lab on the embedded default: two
// logical messages, each delivered twice through the durable queue. Each
// first attempt commits its CRM task and then "crashes" before its ACK; the
// lease expires and the queue delivers the message again, and the inbox
// recognises it.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/internal/pgdb"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport/embedded"
)

// Result is the lab's five counters.
type Result struct {
	Deliveries, Accepted, Duplicates, InboxRows, BusinessEffects int64
}

// Line renders the counters as one line of name=value pairs.
func (r Result) Line() string {
	return fmt.Sprintf("deliveries=%d accepted=%d duplicates=%d inbox_rows=%d business_effects=%d",
		r.Deliveries, r.Accepted, r.Duplicates, r.InboxRows, r.BusinessEffects)
}

const consumer = "crm-followup"

// broker is the embedded queue as a broker apart from the database, as in
// the seed's lab: its ACK is not part of the COMMIT (a queue in the
// store's file would acknowledge inside the batch's transaction and leave
// no window to crash in).
type broker struct{ *embedded.Queue }

// Location hides the queue's database from the consumer.
func (broker) Location() string { return "" }

// where names db for messages without a password.
func where(db string) string {
	if pgdb.IsURL(db) {
		return pgdb.Redact(db)
	}
	return db
}

// fresh refuses a database that already holds a run of the lab.
func fresh(ctx context.Context, st store.Store, consumer, db string) error {
	c, err := st.Executor().Counts(ctx, consumer)
	if err == nil && c.InboxRows > 0 {
		err = fmt.Errorf("%s already holds a demo run (%d inbox rows); use a fresh database", where(db), c.InboxRows)
	}
	return err
}

var messages = []string{
	`{"specversion":"1.0","id":"evt-1","source":"crm/opportunities","type":"followup.requested","partitionkey":"opp-2481","objectversion":41,"businesskey":"followup:opp-2481:meeting-184","data":{"task":"call back"}}`,
	`{"specversion":"1.0","id":"evt-2","source":"crm/opportunities","type":"followup.requested","partitionkey":"opp-2482","objectversion":7,"businesskey":"followup:opp-2482:meeting-185","data":{"task":"send proposal"}}`,
}

// Run runs the lab on db (a SQLite path or a postgres:// URL; it must not
// hold an earlier demo run) and narrates it to w.
func Run(ctx context.Context, db string, w io.Writer) (Result, error) {
	st, err := dbopen.Store(ctx, db)
	if err != nil {
		return Result{}, err
	}
	defer st.Close()
	if err := fresh(ctx, st, consumer, db); err != nil {
		return Result{}, err
	}
	if err := replay.EnsureRecordTables(ctx, st.DB()); err != nil {
		return Result{}, err
	}
	const lease = 500 * time.Millisecond
	q, err := embedded.Open(ctx, db, embedded.Config{Lease: lease, Wait: 50 * time.Millisecond})
	if err != nil {
		return Result{}, err
	}
	defer q.Close()
	for _, m := range messages {
		if err := q.Publish(ctx, []byte(m)); err != nil {
			return Result{}, err
		}
	}
	fmt.Fprintf(w, "published 2 messages to the embedded queue in %s\n", where(db))

	var mu sync.Mutex
	var res Result
	observe := func(result seqboxtype.Result) {
		mu.Lock()
		defer mu.Unlock()
		res.Deliveries++
		switch result.Outcome {
		case seqboxtype.Applied:
			res.Accepted++
		case seqboxtype.Duplicate:
			res.Duplicates++
		}
		fmt.Fprintf(w, "  %s/%s attempt %d: %s\n", result.Source, result.ID, result.Attempt, result.Outcome)
	}
	cfg := seqbox.Config{
		Name: consumer, Store: st, Transport: broker{q}, Handler: replay.RecordHandler(consumer),
		Workers: 1, BatchSize: len(messages), Observer: observe,
	}
	// The lab's crash: every first attempt commits, then dies before its
	// ACK.
	crashCfg := cfg
	crashCfg.Store = own.Wrap(st, own.Options{Hook: func(p fault.Point) error {
		if p == fault.AfterCommit {
			return fault.ErrCrash
		}
		return nil
	}})
	crashing, err := replay.NewConsumer(crashCfg)
	if err != nil {
		return res, err
	}
	if err := crashing.Run(ctx); !errors.Is(err, fault.ErrCrash) {
		return res, fmt.Errorf("first worker: expected the injected crash, got %v", err)
	}
	fmt.Fprintln(w, "worker 1 committed both tasks and crashed before its ACK")
	fmt.Fprintf(w, "the %s leases expire; worker 2 starts and the queue redelivers\n", lease)
	c, err := replay.NewConsumer(cfg)
	if err != nil {
		return res, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ready, leased, err := q.Depth(ctx)
		if err != nil {
			cancel()
			return res, err
		}
		if ready+leased == 0 {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			return res, fmt.Errorf("queue still holds %d messages after 10s", ready+leased)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		return res, err
	}
	counts, err := st.Executor().Counts(ctx, cfg.Name)
	if err != nil {
		return res, err
	}
	res.InboxRows = counts.InboxRows
	if res.BusinessEffects, err = replay.Effects(ctx, st.DB(), cfg.Name); err != nil {
		return res, err
	}
	fmt.Fprintln(w, "queue empty: every delivery acknowledged")
	fmt.Fprintln(w, res.Line())
	return res, nil
}
