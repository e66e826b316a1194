package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/transport/embedded"
)

// insertEffects is one multi-row INSERT of the events' effect rows.
func insertEffects(schema string, evs []seqboxtype.Event) (string, []any) {
	var b strings.Builder
	b.WriteString(`INSERT INTO ` + quote(schema) + `.effects (id, key, version) VALUES `)
	args := make([]any, 0, 3*len(evs))
	for i, ev := range evs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "($%d, $%d, $%d)", 3*i+1, 3*i+2, 3*i+3)
		args = append(args, ev.ID, ev.PartitionKey, *ev.ObjectVersion)
	}
	return b.String(), args
}

// seqboxGuarantee is the row's note: seqbox is the reference.
const seqboxGuarantee = "reference: identity durable in the effect's transaction (30 d); per-key version gate"

// runSeqbox publishes the stream to seqbox's embedded queue in the same
// database (untimed), then times Consumer.Run until every delivery has
// been decided, each applied message's effect row written by the Handler
// in the inbox transaction.
//
// With batch, the effects are written by a BatchHandler: one multi-row
// INSERT per batch instead of one statement per message.
func runSeqbox(ctx context.Context, o Options, admin *sql.DB, schema string, msgs []msg, batch bool) (Result, error) {
	res := Result{System: "seqbox", Guarantee: seqboxGuarantee,
		Settings: fmt.Sprintf("Workers=%d BatchSize=%d, embedded queue on PostgreSQL, Handler", o.SeqboxWorkers, o.SeqboxBatch)}
	if batch {
		res.System = "seqbox-batch"
		res.Settings = strings.Replace(res.Settings, "Handler", "BatchHandler (one multi-row INSERT per batch)", 1)
	}
	st, err := postgres.OpenWith(ctx, o.DB, postgres.Options{Schema: schema})
	if err != nil {
		return res, fmt.Errorf("seqbox store: %w", err)
	}
	defer st.Close()
	if _, err := admin.ExecContext(ctx, fmt.Sprintf(effectsDDL, quote(schema))); err != nil {
		return res, fmt.Errorf("seqbox effects table: %w", err)
	}
	q, err := embedded.Open(ctx, withParam(o.DB, "seqbox_schema", schema), embedded.Config{
		Name: "peers", Wait: 100 * time.Millisecond, PollInterval: 5 * time.Millisecond,
	})
	if err != nil {
		return res, fmt.Errorf("seqbox queue: %w", err)
	}
	defer q.Close()

	t0 := time.Now()
	for from := 0; from < len(msgs); from += 1000 {
		chunk := msgs[from:min(from+1000, len(msgs))]
		bodies := make([][]byte, len(chunk))
		for i, m := range chunk {
			bodies[i] = m.body()
		}
		if err := q.PublishBatch(ctx, bodies); err != nil {
			return res, err
		}
	}
	res.Published = time.Since(t0)

	var applied, dups, other atomic.Int64
	insert := insertEffect(schema)
	cfg := seqbox.Config{
		Name: "peers", Store: st, Transport: q, Workers: o.SeqboxWorkers, BatchSize: o.SeqboxBatch,
		Observer: func(d seqboxtype.Result) {
			switch d.Outcome {
			case seqboxtype.Applied:
				applied.Add(1)
			case seqboxtype.Duplicate:
				dups.Add(1)
			default:
				other.Add(1)
			}
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if batch {
		cfg.BatchHandler = func(ctx context.Context, tx seqbox.Tx, evs []seqboxtype.Event) error {
			q, args := insertEffects(schema, evs)
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		}
	} else {
		cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			_, err := tx.ExecContext(ctx, insert, ev.ID, ev.PartitionKey, *ev.ObjectVersion)
			return err
		}
	}
	c, err := seqbox.NewConsumer(cfg)
	if err != nil {
		return res, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	t0 = time.Now()
	go func() { done <- c.Run(rctx) }()
	var decided atomic.Int64
	waitErr := waitFor(ctx, &decided, o.Stall, func() (bool, error) {
		decided.Store(applied.Load() + dups.Load() + other.Load())
		select {
		case err := <-done:
			done <- err
			return false, fmt.Errorf("seqbox: Run stopped: %v", err)
		default:
		}
		return applied.Load()+dups.Load() >= int64(len(msgs)), nil
	})
	res.Consumed = time.Since(t0)
	cancel()
	runErr := <-done
	if waitErr != nil {
		return res, fmt.Errorf("seqbox: %w (applied=%d duplicate=%d other=%d)", waitErr, applied.Load(), dups.Load(), other.Load())
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return res, fmt.Errorf("seqbox: Run: %w", runErr)
	}
	// The consumer acknowledges in the inbox transaction when the queue and
	// the store name one location (see seqbox.NewConsumer).
	ackInTx := false
	if l, ok := st.(interface{ Location() string }); ok {
		ackInTx = l.Location() != "" && l.Location() == q.Location()
	}
	res.Notes = fmt.Sprintf("outcomes: applied=%d duplicate=%d other=%d; ack in the inbox transaction: %t",
		applied.Load(), dups.Load(), other.Load(), ackInTx)
	res.Effects, err = countEffects(ctx, admin, schema)
	return res, err
}
