package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverGuarantee is what River lacks next to seqbox.
const riverGuarantee = "dedupe at insert only, and only while the job row is kept (24 h default); no per-key order"

// effectArgs is one message as a River job. Only ID takes part in the
// uniqueness check.
type effectArgs struct {
	ID      string `json:"id" river:"unique"`
	Key     string `json:"key"`
	Version int64  `json:"version"`
	N       int    `json:"n"`
}

// Kind names the job kind.
func (effectArgs) Kind() string { return "peers_effect" }

// InsertOpts makes every insert unique by ID, in River's default states
// (pending, scheduled, available, running, retryable, completed).
func (effectArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// effectWorker writes the effect row and completes the job in one
// transaction.
type effectWorker struct {
	river.WorkerDefaults[effectArgs]
	pool   *pgxpool.Pool
	insert string
	done   *atomic.Int64
	// first is when the first job committed (UnixNano), 0 before.
	first *atomic.Int64
}

// Work writes the effect and marks the job completed with JobCompleteTx,
// then commits both at once.
func (w *effectWorker) Work(ctx context.Context, job *river.Job[effectArgs]) error {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if _, err := tx.Exec(ctx, w.insert, job.Args.ID, job.Args.Key, job.Args.Version); err != nil {
		return err
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	w.first.CompareAndSwap(0, time.Now().UnixNano())
	w.done.Add(1)
	return nil
}

// runRiver migrates River into schema, inserts the stream with InsertMany
// (untimed; duplicates are skipped there by UniqueOpts), then times the
// client working every inserted job.
func runRiver(ctx context.Context, o Options, admin *sql.DB, schema string, msgs []msg) (Result, error) {
	res := Result{System: "river", Guarantee: riverGuarantee,
		Settings: fmt.Sprintf("MaxWorkers=%d pool=%d FetchCooldown=%s FetchPollInterval=%s, UniqueOpts{ByArgs} on id",
			o.RiverWorkers, o.RiverPool, o.RiverCooldown, o.RiverPoll)}
	if err := createSchema(ctx, admin, schema); err != nil {
		return res, err
	}
	cfg, err := pgxpool.ParseConfig(o.plainDB())
	if err != nil {
		return res, err
	}
	cfg.MaxConns = int32(o.RiverPool)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	if err := warm(ctx, pool, o.RiverPool); err != nil {
		return res, err
	}
	driver := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: quietLogger()})
	if err != nil {
		return res, err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return res, fmt.Errorf("river migrate: %w", err)
	}
	var done, first atomic.Int64
	workers := river.NewWorkers()
	river.AddWorker(workers, &effectWorker{pool: pool, insert: insertEffect(schema), done: &done, first: &first})
	client, err := river.NewClient(driver, &river.Config{
		Schema:            schema,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.RiverWorkers}},
		FetchCooldown:     o.RiverCooldown,
		FetchPollInterval: o.RiverPoll,
		Workers:           workers,
		Logger:            quietLogger(),
	})
	if err != nil {
		return res, err
	}

	t0 := time.Now()
	var inserted, skipped int64
	var params []river.InsertManyParams
	inBatch := map[string]bool{}
	flush := func() error {
		if len(params) == 0 {
			return nil
		}
		rs, err := client.InsertMany(ctx, params)
		if err != nil {
			return fmt.Errorf("river insert: %w", err)
		}
		for _, r := range rs {
			if r.UniqueSkippedAsDuplicate {
				skipped++
			} else {
				inserted++
			}
		}
		params, inBatch = params[:0], map[string]bool{}
		return nil
	}
	for _, m := range msgs {
		// One statement must not hold an id twice (PostgreSQL refuses an
		// ON CONFLICT that touches a row twice): a repeat starts a batch.
		if len(params) == 1000 || inBatch[m.ID] {
			if err := flush(); err != nil {
				return res, err
			}
		}
		inBatch[m.ID] = true
		params = append(params, river.InsertManyParams{Args: effectArgs{ID: m.ID, Key: m.Key, Version: m.Version, N: m.N}})
	}
	if err := flush(); err != nil {
		return res, err
	}
	res.Published = time.Since(t0)

	t0 = time.Now()
	if err := client.Start(ctx); err != nil {
		return res, fmt.Errorf("river start: %w", err)
	}
	waitErr := waitFor(ctx, &done, o.Stall, func() (bool, error) { return done.Load() >= inserted, nil })
	res.Consumed = time.Since(t0)
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stopErr := client.Stop(stopCtx)
	if waitErr != nil {
		return res, fmt.Errorf("river: %w (worked %d of %d)", waitErr, done.Load(), inserted)
	}
	if stopErr != nil {
		return res, fmt.Errorf("river stop: %w", stopErr)
	}
	var completed int64
	if err := admin.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+quote(schema)+`.river_job WHERE state = 'completed'`).Scan(&completed); err != nil {
		return res, err
	}
	res.Notes = fmt.Sprintf("jobs inserted=%d skipped_as_duplicate=%d completed=%d; first job committed %.2fs after Start",
		inserted, skipped, completed, time.Unix(0, first.Load()).Sub(t0).Seconds())
	res.Effects, err = countEffects(ctx, admin, schema)
	return res, err
}

// quietLogger passes on warnings and errors only.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// warm opens n connections of pool before the clock starts, so that the
// timed run does not pay for backend start-ups.
func warm(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("river pool: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}
