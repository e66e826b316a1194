package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// WorkerOptions configure one chaos process.
type WorkerOptions struct {
	// DB is the store and queue location (SQLite path or postgres:// URL).
	DB string
	// Mode is consume, redrive, purge or checkpoint.
	Mode string
	// Lease is the queue's visibility timeout.
	Lease time.Duration
	// Workers and Batch size the consumer.
	Workers, Batch int
	// NowOffset shifts the consumer's clock (purge runs in the future).
	NowOffset time.Duration
	// Slow makes one handler call in a hundred take longer than a third of
	// the lease, so leases are extended mid-batch.
	Slow bool
	// Queue is the embedded queue (Config.Name) consume mode receives
	// from. Default "default".
	Queue string
	// DiskFullFor makes the disk "full" for this long from the start of
	// consume mode (see fillDisk).
	DiskFullFor time.Duration
	// Transport is what consume mode receives from: embedded (default),
	// nats or kafka; Broker and Topic name the broker's address and the
	// scenario's stream or topic.
	Transport, Broker, Topic string
	// Transports opens the transports this binary links beyond the
	// harness's own, by name (seqbox-lab's pubsub: the operator binary
	// does not link its client).
	Transports map[string]WorkerTransport
	// Name is the consumer's name: Consumer (default) or the outbox
	// chain's second stage. Emit makes the first stage emit through its
	// outbox.
	Name string
	Emit bool
	// Remote, when set, is the agent-ledger scenario's remote API: the
	// consumer's Decide creates each message's effect there through the
	// effect ledger.
	Remote string
}

var firstVersion int64 = 1

// RunWorker is the body of a chaos process. consume runs until ctx ends;
// redrive and purge run once.
func RunWorker(ctx context.Context, opt WorkerOptions) error {
	st, err := dbopen.Store(ctx, opt.DB)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := ensureTables(ctx, st.DB()); err != nil {
		return err
	}
	h := handler()
	if opt.Slow {
		h = slow(h, opt.Lease/2)
	}
	if opt.Emit {
		h = emitting(h)
	}
	name := Consumer
	if opt.Name == chainConsumer {
		name, h = chainConsumer, replay.RecordHandler(chainConsumer)
	}
	cfg := seqbox.Config{
		Name: name, Store: st, Handler: h,
		Workers: opt.Workers, BatchSize: opt.Batch,
		Policies: seqbox.Policies{
			Retry:       seqbox.RetryPolicy{MaxAttempts: 30, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond},
			HoldTimeout: time.Hour,
			// The workload's keys start at version 1; without this, a key
			// whose v2 arrived first would take v2 as its baseline.
			FirstVersion: &firstVersion,
		},
		ExtendEvery: opt.Lease / 3, ExtendBy: opt.Lease,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	}
	if opt.NowOffset != 0 {
		cfg.Now = func() time.Time { return time.Now().Add(opt.NowOffset) }
	}
	if opt.Remote != "" {
		if err := withRemote(&cfg, st, opt.Remote); err != nil {
			return err
		}
		cfg.ClaimHeartbeat = opt.Lease / 4
	}
	// The harness kills this process at a fault point named in the
	// environment; only the chaos worker reads it.
	crash, err := fault.FromEnv()
	if err != nil {
		return err
	}
	newConsumer := func() (*seqbox.Consumer, error) {
		armed := cfg
		armed.Store = own.Wrap(cfg.Store, own.Options{Hook: crash})
		return seqbox.NewConsumer(armed)
	}
	switch opt.Mode {
	case "relay":
		return runRelay(ctx, st, opt, crash)
	case "checkpoint":
		// Checkpoint the WAL over and over, so that a SIGKILL lands in
		// the middle of one.
		for ctx.Err() == nil {
			if _, err := st.DB().ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil && ctx.Err() == nil {
				return fmt.Errorf("checkpoint: %w", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	case "consume":
		q, err := openTransport(ctx, opt)
		if err != nil {
			return err
		}
		defer q.Close()
		// The harness checks a consumer's lock on the file only once
		// it has opened it (filelocks.go).
		fmt.Fprintln(os.Stderr, workerReady)
		cfg.Transport = q
		if opt.DiskFullFor > 0 {
			if err := fillDisk(ctx, opt.DiskFullFor, func(s string) { fmt.Fprintln(os.Stderr, s) }); err != nil {
				return err
			}
		}
		c, err := newConsumer()
		if err != nil {
			return err
		}
		return c.Run(ctx)
	case "redrive":
		c, err := newConsumer()
		if err != nil {
			return err
		}
		letters, err := st.Executor().DeadLetterList(ctx, store.DeadLetterListParams{Consumer: Consumer, All: false})
		if err != nil {
			return err
		}
		for _, letter := range letters {
			if letter.ID == "" || letter.Reason == "" || isRejected(letter.Reason) {
				continue
			}
			if _, err := c.Redrive(ctx, letter.Seq); err != nil && !errors.Is(err, seqbox.ErrNotBlocking) {
				return fmt.Errorf("redrive %d: %w", letter.Seq, err)
			}
		}
		return nil
	case "purge":
		c, err := newConsumer()
		if err != nil {
			return err
		}
		n, err := c.Purge(ctx, 100)
		fmt.Fprintf(os.Stdout, "purged=%d\n", n)
		return err
	}
	return fmt.Errorf("chaos worker: unknown mode %q", opt.Mode)
}

func isRejected(reason string) bool {
	return len(reason) >= len(seqboxtype.Rejected) && reason[:len(seqboxtype.Rejected)] == string(seqboxtype.Rejected)
}

// slow delays one handler call in a hundred by d.
func slow(h seqbox.Handler, d time.Duration) seqbox.Handler {
	var n atomic.Int64
	return func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		if n.Add(1)%100 == 0 {
			time.Sleep(d)
		}
		return h(ctx, tx, ev)
	}
}
