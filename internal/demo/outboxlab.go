package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport/embedded"
)

// OutboxResult is the outbox lab's line.
type OutboxResult struct {
	Emitted, PublishedAtLeast, DownstreamApplied, DownstreamDuplicates, OrderViolations int
}

// Line renders the counters.
func (r OutboxResult) Line() string {
	return fmt.Sprintf("emitted=%d published_at_least=%d downstream_applied=%d downstream_duplicates=%d order_violations=%d",
		r.Emitted, r.PublishedAtLeast, r.DownstreamApplied, r.DownstreamDuplicates, r.OrderViolations)
}

const (
	outboxKeys     = 5
	outboxVersions = 6
	outboxLease    = time.Second
)

// outboxRoles are the lab's processes, each with the fault point its first
// run dies at (SIGKILL).
var outboxRoles = []struct{ role, fault string }{
	{"billing", string(fault.AfterCommit) + ":2"},
	{"relay", string(fault.RelayAfterPublish) + ":1"},
	{"ledger", string(fault.AfterCommit) + ":3"},
}

// RunOutbox runs the outbox lab: orders → billing (applies each order
// change and emits an invoice event in the same transaction) → relay
// (publishes billing's outbox) → ledger (applies invoices, in order per
// order). Each of the three processes is killed once at its critical
// point: billing after COMMIT before ACK, the relay after publishing
// before marking, the ledger after COMMIT before ACK.
func RunOutbox(ctx context.Context, self, db string, w io.Writer) (OutboxResult, error) {
	var res OutboxResult
	st, err := dbopen.Store(ctx, db)
	if err != nil {
		return res, err
	}
	defer st.Close()
	for _, c := range []string{"billing", "ledger"} {
		if err := fresh(ctx, st, c, db); err != nil {
			return res, err
		}
	}
	for _, ddl := range []string{
		`CREATE TABLE IF NOT EXISTS invoices (order_event TEXT PRIMARY KEY, order_id TEXT NOT NULL, version BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ledger_entries (seq BIGINT NOT NULL, invoice TEXT PRIMARY KEY, order_id TEXT NOT NULL, version BIGINT NOT NULL)`,
	} {
		if _, err := st.DB().ExecContext(ctx, ddl); err != nil {
			return res, err
		}
	}
	orders, err := embedded.Open(ctx, db, embedded.Config{Name: "orders", Lease: outboxLease})
	if err != nil {
		return res, err
	}
	defer orders.Close()
	var bodies [][]byte
	for v := 1; v <= outboxVersions; v++ {
		for k := 1; k <= outboxKeys; k++ {
			bodies = append(bodies, fmt.Appendf(nil, `{"specversion":"1.0","id":"ord-%d-v%d","source":"shop","type":"order.changed","partitionkey":"PED-%d","objectversion":%d}`, k, v, 4820+k, v))
		}
	}
	if err := orders.PublishBatch(ctx, bodies); err != nil {
		return res, err
	}
	fmt.Fprintf(w, "published %d order changes (%d orders x %d versions)\n", len(bodies), outboxKeys, outboxVersions)
	var dups atomic.Int64
	scan := func(out io.Reader) {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(w, line)
			if strings.HasPrefix(line, "  ledger ") && strings.HasSuffix(line, ": duplicate") {
				dups.Add(1)
			}
		}
	}
	armed := map[string]bool{"billing": true, "relay": true, "ledger": true}
	for round := 1; round <= 6; round++ {
		var wg sync.WaitGroup
		errs := make(chan error, len(outboxRoles))
		for _, r := range outboxRoles {
			var env []string
			if armed[r.role] {
				env = []string{fault.Env + "=" + r.fault}
			}
			wg.Go(func() {
				pr, pw := io.Pipe()
				done := make(chan struct{})
				go func() { scan(pr); close(done) }()
				defer func() { pw.Close(); <-done }()
				p, err := startWorker(self, pw, env, "--scenario", "outbox", "--db", db, "--role", r.role)
				if err != nil {
					errs <- err
					return
				}
				killed, err := p.wait()
				if err != nil {
					errs <- fmt.Errorf("%s: %w", r.role, err)
					return
				}
				if killed {
					fmt.Fprintf(pw, "%s killed at %s (SIGKILL)\n", r.role, r.fault)
				}
			})
			armed[r.role] = false
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return res, err
		}
		var applied, pending int
		if err := st.DB().QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM ledger_entries),
			(SELECT COUNT(*) FROM seqbox_outbox WHERE published_at IS NULL)`).Scan(&applied, &pending); err != nil {
			return res, err
		}
		if applied == len(bodies) && pending == 0 {
			break
		}
		fmt.Fprintf(w, "round %d ended with %d of %d invoices in the ledger; another round\n", round, applied, len(bodies))
	}
	if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*), COUNT(published_at) FROM seqbox_outbox`).Scan(&res.Emitted, &res.PublishedAtLeast); err != nil {
		return res, err
	}
	res.DownstreamDuplicates = int(dups.Load())
	if res.DownstreamApplied, res.OrderViolations, err = ledgerOrder(ctx, st); err != nil {
		return res, err
	}
	fmt.Fprintln(w, res.Line())
	return res, nil
}

// ledgerOrder counts the ledger's entries and the entries that are not
// the next version of their order.
func ledgerOrder(ctx context.Context, st store.Store) (applied, violations int, err error) {
	rows, err := st.DB().QueryContext(ctx, `SELECT order_id, version FROM ledger_entries ORDER BY seq`)
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	next := map[string]int64{}
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			return 0, 0, err
		}
		applied++
		if v != next[id]+1 {
			violations++
		}
		next[id] = v
	}
	return applied, violations, rows.Err()
}

// RunOutboxWorker is one process of the outbox lab, in role billing,
// relay or ledger; it works until idle, then exits.
func RunOutboxWorker(ctx context.Context, db, role string, w io.Writer) error {
	st, err := dbopen.StoreAccess(ctx, db, store.Adopt)
	if err != nil {
		return err
	}
	defer st.Close()
	crash, err := fault.FromEnv()
	if err != nil {
		return err
	}
	invoices, err := embedded.Open(ctx, db, embedded.Config{Name: "invoices", Lease: outboxLease})
	if err != nil {
		return err
	}
	defer invoices.Close()
	if role == "relay" {
		return relayUntilIdle(ctx, st, invoices, crash)
	}
	queue := invoices
	if role == "billing" {
		orders, err := embedded.Open(ctx, db, embedded.Config{Name: "orders", Lease: outboxLease})
		if err != nil {
			return err
		}
		defer orders.Close()
		queue = orders
	}
	var mu sync.Mutex
	first := int64(1)
	cfg := seqbox.Config{
		Name: role, Store: st, Transport: broker{queue}, Workers: 2, BatchSize: 4,
		Policies:    seqbox.Policies{FirstVersion: &first, HoldTimeout: time.Minute},
		ExtendEvery: outboxLease / 3, ExtendBy: outboxLease,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observer: func(res seqboxtype.Result) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(w, "  %s %s attempt %d: %s\n", role, res.ID, res.Attempt, res.Outcome)
		},
	}
	switch role {
	case "billing":
		cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			v, _ := ev.Version()
			if _, err := tx.ExecContext(ctx, `INSERT INTO invoices (order_event, order_id, version) VALUES ($1, $2, $3)`, ev.ID, ev.PartitionKey, v); err != nil {
				return err
			}
			return outbox.Emit(ctx, tx, fmt.Appendf(nil, `{"specversion":"1.0","id":"inv-%s","source":"billing","type":"invoice.issued","partitionkey":%q,"objectversion":%d}`, ev.ID, ev.PartitionKey, v))
		}
	case "ledger":
		cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			v, _ := ev.Version()
			_, err := tx.ExecContext(ctx, `INSERT INTO ledger_entries (seq, invoice, order_id, version)
				SELECT COALESCE(MAX(seq), 0) + 1, $1, $2, $3 FROM ledger_entries`, ev.ID, ev.PartitionKey, v)
			return err
		}
	default:
		return fmt.Errorf("demo worker: --role %q: not billing, relay or ledger", role)
	}
	cfg.Store = own.Wrap(st, own.Options{Hook: crash})
	c, err := seqbox.NewConsumer(cfg)
	if err != nil {
		return err
	}
	return c.RunUntilIdle(ctx, 3*time.Second)
}

// relayUntilIdle relays billing's outbox until nothing has been waiting
// for a few seconds.
func relayUntilIdle(ctx context.Context, st store.Store, pub *embedded.Queue, crash fault.Hook) error {
	r, err := outbox.NewRelay(own.Wrap(st, own.Options{Hook: crash}), pub, outbox.Config{Batch: 8, Lease: 2 * outboxLease, Interval: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	idleSince := time.Now()
	for time.Since(idleSince) < 4*time.Second {
		n, err := r.RunOnce(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			idleSince = time.Now()
			continue
		}
		time.Sleep(50 * time.Millisecond)
	}
	return r.Release(ctx)
}
