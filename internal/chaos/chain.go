package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport/embedded"
)

// The two-stage scenario (outbox-chain): the chaos consumer (stage A)
// emits one event through its outbox for every message it applies; a relay
// process publishes them to the embedded queue downstreamQueue, and a
// second consumer (stage B) applies them. Consumers of both stages and the
// relay are SIGKILLed at random. B's effects must be exactly A's, once
// each, in order per key.
const (
	chainScenario   = "outbox-chain"
	chainConsumer   = "chaos-b"
	downstreamQueue = "downstream"
	emitSeqSchema   = `CREATE TABLE IF NOT EXISTS chaos_emit_seq (pkey TEXT PRIMARY KEY, n BIGINT NOT NULL)`
)

// emitting wraps stage A's handler: after the effect, the next downstream
// event of the message's key is emitted in the same transaction. Its
// objectversion counts A's applications of the key, so B sees 1, 2, 3…
// with no gaps whatever A skipped.
func emitting(h seqbox.Handler) seqbox.Handler {
	return func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
		if err := h(ctx, tx, ev); err != nil {
			return err
		}
		key := ev.PartitionKey
		if key == "" {
			key = "id:" + ev.ID
		}
		var n int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO chaos_emit_seq (pkey, n) VALUES ($1, 1)
			ON CONFLICT (pkey) DO UPDATE SET n = chaos_emit_seq.n + 1 RETURNING n`, key).Scan(&n); err != nil {
			return err
		}
		return outbox.Emit(ctx, tx, fmt.Appendf(nil,
			`{"specversion":"1.0","id":"ds-%s","source":"chaos-a","type":"chaos.applied","partitionkey":%q,"objectversion":%d}`,
			ev.ID, key, n))
	}
}

// runRelay is the relay process: it publishes the outbox to the
// downstream queue until ctx ends, dying where SEQBOX_FAULT says.
func runRelay(ctx context.Context, st store.Store, opt WorkerOptions, crash fault.Hook) error {
	q, err := embedded.Open(ctx, opt.DB, embedded.Config{Name: downstreamQueue, Lease: opt.Lease})
	if err != nil {
		return err
	}
	defer q.Close()
	r, err := outbox.NewRelay(own.Wrap(st, own.Options{Hook: crash}), q, outbox.Config{Batch: 64, Lease: 2 * opt.Lease, Interval: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// startChain starts stage B's consumer and the relay (chain[0], chain[1]).
func (s *scenarioRun) startChain(i int) error {
	var p *proc
	var err error
	if i == 0 {
		p, err = s.h.start("relay", nil, "--mode", "relay", "--db", s.db, "--lease", s.h.opt.Lease.String())
	} else {
		p, err = s.h.start("consumer-b", nil, "--mode", "consume", "--db", s.db, "--lease", s.h.opt.Lease.String(),
			"--workers", "2", "--batch", "32", "--name", chainConsumer, "--queue", downstreamQueue)
	}
	if err == nil {
		s.chain[i] = p
	}
	return err
}

// chainPending counts what stage B has still to apply: unpublished
// outbox rows, the downstream queue, and B's held or blocked messages.
func (s *scenarioRun) chainPending(ctx context.Context) (int, error) {
	var n int
	if err := s.st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_outbox WHERE published_at IS NULL`).Scan(&n); err != nil {
		return 0, err
	}
	ready, leased, err := s.downstream.Depth(ctx)
	if err != nil {
		return 0, err
	}
	c, err := s.st.Executor().Counts(ctx, chainConsumer)
	return n + ready + leased + int(c.Held+c.Blocked), err
}

// verifyChain checks B against A: for each key, B applied 1..m once each
// and in order, where m is how many messages of the key A applied.
func verifyChain(ctx context.Context, st store.Store, res *Result) error {
	count := func(consumer string) (map[string][]int64, error) {
		rows, err := st.DB().QueryContext(ctx, `SELECT partitionkey, COALESCE(objectversion, 0) FROM seqbox_record_effects
			WHERE consumer = $1 ORDER BY n`, consumer)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[string][]int64{}
		for rows.Next() {
			var k string
			var v int64
			if err := rows.Scan(&k, &v); err != nil {
				return nil, err
			}
			out[k] = append(out[k], v)
		}
		return out, rows.Err()
	}
	a, err := count(Consumer)
	if err != nil {
		return err
	}
	b, err := count(chainConsumer)
	if err != nil {
		return err
	}
	want := map[string]int{}
	for k, vs := range a {
		if k == "" {
			continue // each is its own downstream key, checked below
		}
		want[k] = len(vs)
	}
	free := len(a[""])
	for k, vs := range b {
		if strings.HasPrefix(k, "id:") {
			free--
			if len(vs) != 1 || vs[0] != 1 {
				res.fail("stage B key %s applied %v, want [1]", k, vs)
			}
			continue
		}
		ok := len(vs) == want[k]
		for i, v := range vs {
			ok = ok && v == int64(i+1)
		}
		if !ok {
			res.fail("stage B key %s applied %s, want 1..%d once each in order", k, short(vs), want[k])
		}
		delete(want, k)
	}
	for k, m := range want {
		res.fail("stage B never applied key %s (stage A applied %d)", k, m)
	}
	if free != 0 {
		res.fail("stage B applied %d keyless events more or fewer than stage A", -free)
	}
	return nil
}
