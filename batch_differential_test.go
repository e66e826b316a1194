package seqbox_test

// TestBatchMatchesOneByOne is a differential state-machine test of the
// batch path. A batch's first run is optimistic (docs/design.md §5): it
// locks its keys and inserts its identities up front, as applied until
// each delivery says otherwise, defers its writes, and reads turns and
// retry rows from memory. Each of those shortcuts must give what the
// same copies delivered one by one give. Two consumers on two stores
// see the same steps; one takes each step's copies as one DeliverBatch,
// the other one Deliver per copy, in order. The outcomes each identity
// reached in a step, and every table that tells the state apart (the
// inbox, each key's apply log in commit order, parked messages, dead
// letters, turns, keys, decisions) must agree. The handler (and, when
// the run draws one, Decide) fails as the steps say, the same in both.
//
// It found a failed message's rollback taking with it the key row the
// message had created, so that its turn stood on a key `keys release`
// could not find (TestTurnOnANewKeyCanBeReleased): the root of the order
// hole of TestRetryingMessageWhoseCopyIsInTheBatchKeepsTheTurn, which
// TestRapidModel, whose batches are whatever its queue hands out, did
// not find. What it cannot see: races between processes (TestRapidModel,
// TestRapidModelPostgres and chaos cover those), and Decide calls in
// flight while a batch runs (Decide here answers at once).
//
//	go test -run TestBatchMatchesOneByOne -count=1 . [-rapid.checks=N] [-rapid.seed=S]

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/pgtest"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
	"github.com/seqbox/seqbox/store/sqlite"
)

// dEvent is one event of the differential scenario, with its two
// payloads under one id.
type dEvent struct {
	id        string
	body, alt []byte
}

// dEvents: a key without versions (k1), two of whose events share a
// business key, a key with versions (k2), and an unkeyed event. Which of
// two identities of a business key on two keys wins is up to their race
// (the state-machine tests check that one does), so the business key is
// shared within one key here, where the key's order decides.
var dEvents = func() []dEvent {
	var out []dEvent
	add := func(id, fields string) {
		mk := func(n int) []byte {
			return fmt.Appendf(nil, `{"id":%q,"source":"diff","type":"t"%s,"data":{"n":%d}}`, id, fields, n)
		}
		out = append(out, dEvent{id: id, body: mk(1), alt: mk(2)})
	}
	for i := 1; i <= 3; i++ {
		bk := ""
		if i >= 2 {
			bk = `,"businesskey":"bk"`
		}
		add(fmt.Sprintf("k1-e%d", i), `,"partitionkey":"k1"`+bk)
	}
	for v := 1; v <= 3; v++ {
		add(fmt.Sprintf("k2-v%d", v), fmt.Sprintf(`,"partitionkey":"k2","objectversion":%d`, v))
	}
	add("u-1", "")
	return out
}()

// drawEvent draws one of dEvents (by id, for rapid's log).
func drawEvent(t *rapid.T, label string) dEvent {
	ids := make([]string, len(dEvents))
	for i, e := range dEvents {
		ids[i] = e.id
	}
	id := rapid.SampledFrom(ids).Draw(t, label)
	return dEvents[slices.Index(ids, id)]
}

// failMode is how the handler (or Decide) treats an event's next runs.
type failMode int

const (
	runOK failMode = iota
	runTransient
	runPermanent
)

func (m failMode) String() string { return [...]string{"ok", "transient", "permanent"}[m] }

// dSide is one of the two consumers: its store and what it applied.
type dSide struct {
	name     string
	consumer string
	st       store.Store
	c        *seqbox.Consumer
}

// dWorld is one run: the two sides, the failures the steps set, and the
// clock both read.
type dWorld struct {
	mu        sync.Mutex
	now       time.Time
	handler   map[string]failMode
	decide    map[string]failMode
	withAgent bool
	batch     *dSide // takes each step's copies as one DeliverBatch
	single    *dSide // one Deliver per copy
	log       []string
}

func (w *dWorld) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func (w *dWorld) mode(m map[string]failMode, id string) failMode {
	w.mu.Lock()
	defer w.mu.Unlock()
	return m[id]
}

// openSide opens the consumer named consumer over st, with the handler's
// apply log.
func (w *dWorld) openSide(t *rapid.T, name, consumer string, st store.Store) *dSide {
	ctx := context.Background()
	seq := "INTEGER"
	if strings.HasPrefix(name, "postgres") {
		seq = "BIGSERIAL"
	}
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS diff_applied (seq `+seq+` PRIMARY KEY, consumer TEXT NOT NULL,
		partitionkey TEXT NOT NULL, id TEXT NOT NULL, hash TEXT NOT NULL, decision TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	cfg := seqbox.Config{
		Name: consumer, Store: st, Now: w.clock, Logger: rapidQuiet,
		Handler: func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			switch w.mode(w.handler, ev.ID) {
			case runTransient:
				return errors.New("the step says: a transient failure")
			case runPermanent:
				return seqbox.Permanent(errors.New("the step says: a permanent failure"))
			}
			d, _ := seqbox.DecisionFrom(ctx)
			_, err := tx.ExecContext(ctx, `INSERT INTO diff_applied (consumer, partitionkey, id, hash, decision) VALUES ($1, $2, $3, $4, $5)`,
				consumer, ev.PartitionKey, ev.ID, ev.Hash, string(d))
			return err
		},
		Policies: seqbox.Policies{Retry: seqbox.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: 4 * time.Second},
			HoldTimeout: time.Minute},
	}
	if w.withAgent {
		cfg.Decide = func(_ context.Context, ev seqboxtype.Event) ([]byte, error) {
			switch w.mode(w.decide, ev.ID) {
			case runTransient:
				return nil, errors.New("the agent says: a transient failure")
			case runPermanent:
				return nil, seqbox.Permanent(errors.New("the agent says: a permanent failure"))
			}
			return []byte("done:" + ev.ID), nil
		}
	}
	c, err := seqbox.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &dSide{name: name, consumer: consumer, st: st, c: c}
}

// outcomeLines is results as "id:outcome" lines.
func outcomeLines(rs []seqboxtype.Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID + ":" + string(r.Outcome)
	}
	return out
}

// state is what tells a side's state apart: rows of every table that
// matters, as sorted text, and the apply log of each key in commit
// order.
//
// passedBlocked: one difference is the race's to decide. A version at or
// below its key's committed one that meets the key blocked parks as
// blocked (the gate checks a blocked key first, as the contract orders it),
// and otherwise ends stale. In a batch, the dead letter that blocks the
// key may belong to a batch-mate still being decided when the version
// passes the gate (a passed version waits behind no turn), as it would
// for a dead letter being decided elsewhere: it ends stale, where one by
// one it parked. It can never apply either way, so both read as stale.
func (s *dSide) state(t *rapid.T) string {
	ctx := context.Background()
	var parts []string
	for _, q := range []struct{ name, query string }{
		// A version at or below its key's, parked behind the blocked key,
		// is stale whatever comes (passedBlocked).
		{"inbox", `SELECT i.id, CASE WHEN i.outcome = 'blocked' AND i.objectversion <= k.version THEN 'stale' ELSE i.outcome END, i.payload_hash
			FROM seqbox_inbox i LEFT JOIN seqbox_keys k ON k.consumer = i.consumer AND k.partitionkey = i.partitionkey
			WHERE i.consumer = $1 ORDER BY i.id`},
		// Each key's effects in commit order (keys run side by side).
		{"applied", `SELECT partitionkey, id, hash, decision FROM diff_applied WHERE consumer = $1 ORDER BY partitionkey, seq`},
		{"parked", `SELECT p.id, p.reason FROM seqbox_parked p LEFT JOIN seqbox_keys k ON k.consumer = p.consumer AND k.partitionkey = p.partitionkey
			WHERE p.consumer = $1 AND NOT (p.reason = 'blocked' AND COALESCE(p.objectversion <= k.version, false)) ORDER BY p.id, p.reason`},
		{"dlq", `SELECT id, state FROM seqbox_dlq WHERE consumer = $1 ORDER BY id, state`},
		{"turns", `SELECT partitionkey, id, attempts FROM seqbox_retries WHERE consumer = $1 ORDER BY partitionkey, id`},
		{"keys", `SELECT partitionkey, COALESCE(version, -1), blocked FROM seqbox_keys WHERE consumer = $1 ORDER BY partitionkey`},
		{"decisions", `SELECT id, decision FROM seqbox_decisions WHERE consumer = $1 ORDER BY id`},
	} {
		rows, err := s.st.DB().QueryContext(ctx, q.query, s.consumer)
		if err != nil {
			t.Fatalf("%s: %s: %v", s.name, q.query, err)
		}
		cols, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var f []string
			for _, v := range vals {
				f = append(f, v.String)
			}
			lines = append(lines, strings.Join(f, " "))
		}
		rows.Close()
		if q.name == "keys" {
			// A key's row with no version and not blocked tells nothing:
			// whether one stands is the path's own business.
			lines = slices.DeleteFunc(lines, func(l string) bool {
				return strings.HasSuffix(l, " -1 0") || strings.HasSuffix(l, " -1 false")
			})
		}
		parts = append(parts, q.name+": "+strings.Join(lines, "; "))
	}
	return strings.Join(parts, "\n    ")
}

// keyVersion is key's committed version on s (-1 when none).
func (s *dSide) keyVersion(t *rapid.T, key string) int64 {
	var v sql.NullInt64
	err := s.st.DB().QueryRowContext(context.Background(), `SELECT version FROM seqbox_keys WHERE consumer = $1 AND partitionkey = $2`, s.consumer, key).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	if !v.Valid {
		return -1
	}
	return v.Int64
}

// openDLQ is the sequence of id's open dead letter on s, or 0.
func (s *dSide) openDLQ(t *rapid.T, id string) int64 {
	var seq int64
	err := s.st.DB().QueryRowContext(context.Background(), `SELECT seq FROM seqbox_dlq WHERE consumer = $1 AND id = $2 AND state = 'open'`, s.consumer, id).Scan(&seq)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return seq
}

// passedParked is the ids s holds parked as blocked whose version its key
// has passed: the state reads them as stale already (passedBlocked).
func (s *dSide) passedParked(t *rapid.T) map[string]bool {
	rows, err := s.st.DB().QueryContext(context.Background(), `SELECT p.id FROM seqbox_parked p JOIN seqbox_keys k ON k.consumer = p.consumer AND k.partitionkey = p.partitionkey
		WHERE p.consumer = $1 AND p.reason = 'blocked' AND p.objectversion <= k.version`, s.consumer)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// step runs f on both sides and fails when their outcomes or states
// differ. A message one side held parked behind its blocked key, that the
// other ended stale at once (passedBlocked), ends stale when the step lets
// it out: that line changes nothing the state does not already read so,
// and is left out.
func (w *dWorld) step(t *rapid.T, what string, f func(s *dSide, batch bool) ([]string, error)) {
	w.log = append(w.log, what)
	got := map[*dSide][]string{}
	for _, s := range []*dSide{w.batch, w.single} {
		passed := s.passedParked(t)
		out, err := f(s, s == w.batch)
		if err != nil {
			w.fatal(t, "%s on %s: %v", what, s.name, err)
		}
		got[s] = slices.DeleteFunc(out, func(l string) bool {
			id, outcome, _ := strings.Cut(l, ":")
			return passed[id] && outcome == string(seqboxtype.Stale)
		})
	}
	w.compare(t, what, got[w.batch], got[w.single])
}

// compare fails when the two sides' outcomes or states differ.
func (w *dWorld) compare(t *rapid.T, what string, batch, single []string) {
	if !slices.Equal(batch, single) {
		w.fatal(t, "%s: the batch gave\n    %v\n  one by one gave\n    %v\n  state (batch):\n    %s\n  state (one by one):\n    %s",
			what, batch, single, w.batch.state(t), w.single.state(t))
	}
	if a, b := w.batch.state(t), w.single.state(t); a != b {
		w.fatal(t, "%s: outcomes agree (%v), states differ:\n  batch:\n    %s\n  one by one:\n    %s", what, batch, a, b)
	}
}

// fatal fails the run with the steps so far.
func (w *dWorld) fatal(t *rapid.T, format string, args ...any) {
	t.Fatalf(format+"\n  steps:\n    %s", append(args, strings.Join(w.log, "\n    "))...)
}

// waitsForBatchMate reports a batch's copy sent back to wait because
// another identity of its business key, earlier in the same batch, was
// stopped to be decided (a keyed successor runs again after its
// predecessor instead; a business key's sibling waits as it would for
// one decided elsewhere: docs/design.md §10.2). Delivered one by one,
// the sibling was decided first, so the copy ends at once.
func waitsForBatchMate(r seqboxtype.Result) bool {
	return r.Outcome == seqboxtype.Retry && strings.Contains(r.Reason, "is being decided under")
}

// deliver is the "deliver" step: raws as one DeliverBatch on the batch
// side, one Deliver each on the other. A batch's copy that waited for a
// batch-mate of its business key (waitsForBatchMate) where one by one it
// ended is delivered again, as its broker would, and that answer counts.
func (w *dWorld) deliver(t *rapid.T, what string, raws [][]byte) {
	ctx := context.Background()
	w.log = append(w.log, what)
	batch, err := w.batch.c.DeliverBatch(ctx, raws)
	if err != nil {
		w.fatal(t, "%s on %s: %v", what, w.batch.name, err)
	}
	var wantRs [][]seqboxtype.Result
	retried := map[string][]seqboxtype.Result{} // by copy: one whose agent failed
	for _, raw := range raws {
		single, ok := retried[string(raw)]
		if !ok {
			if single, err = w.single.c.Deliver(ctx, raw, 1); err != nil {
				w.fatal(t, "%s on %s: %v", what, w.single.name, err)
			}
		}
		if single[0].Outcome == seqboxtype.Retry && strings.Contains(single[0].Reason, "the agent says") {
			// A batch asks the agent once for its copies of one
			// identity with one payload: a copy after one whose
			// decision failed shares that attempt (a handler's failure
			// is each copy's own, as one by one).
			retried[string(raw)] = single[:1]
		}
		wantRs = append(wantRs, single)
	}
	again := false
	for i, raw := range raws {
		if rs := batch[i]; waitsForBatchMate(rs[0]) && wantRs[i][0].Outcome != seqboxtype.Retry {
			w.log = append(w.log, fmt.Sprintf("  (batch side: copy %d waited for a batch-mate of its business key; delivered again)", i))
			if _, err = w.batch.c.Deliver(ctx, raw, 1); err != nil {
				w.fatal(t, "%s on %s, again: %v", what, w.batch.name, err)
			}
			again = true
		}
	}
	if again {
		// The copy delivered again may let others out that the batch
		// held behind it: the outcomes of the step differ in shape,
		// and the states must agree.
		w.compare(t, what, nil, nil)
		return
	}
	w.compare(t, what, w.reachedOutcomes(t, batch), w.reachedOutcomes(t, wantRs))
}

// reachedOutcomes is, for each identity of a step's results, the outcomes it
// reached other than retry and duplicate, as sorted lines. Which of a
// batch's copies of one identity is decided, and which waits for it
// (retry) or finds it decided (duplicate), is up to its deciders'
// race; what each identity reached is not.
// A blocked outcome of a version already passed reads as stale
// (passedBlocked).
func (w *dWorld) reachedOutcomes(t *rapid.T, rss [][]seqboxtype.Result) []string {
	seen := map[string]bool{}
	for _, rs := range rss {
		for _, r := range rs {
			o := r.Outcome
			if o == seqboxtype.Blocked && r.ObjectVersion != nil && *r.ObjectVersion <= w.batch.keyVersion(t, r.PartitionKey) {
				o = seqboxtype.Stale
			}
			if o != seqboxtype.Retry && o != seqboxtype.Duplicate {
				seen[r.ID+":"+string(o)] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for l := range seen {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

func TestBatchMatchesOneByOne(t *testing.T) {
	rapidDefault(t, "rapid.checks", "RAPID_CHECKS", "300")
	rapidDefault(t, "rapid.nofailfile", "RAPID_NOFAILFILE", "true")
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			// On PostgreSQL the batch side's runs share one schema, each
			// with a consumer of its own (a schema each would hold a
			// connection each until the test ends).
			var pg store.Store
			if kind == "postgres" {
				var err error
				if pg, err = postgres.Open(context.Background(), pgtest.URL(t)); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { pg.Close() })
			}
			base := t.TempDir()
			n := 0
			rapid.Check(t, func(rt *rapid.T) {
				n++
				dir := filepath.Join(base, fmt.Sprint(n))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					rt.Fatal(err)
				}
				defer os.RemoveAll(dir)
				w := &dWorld{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), handler: map[string]failMode{}, decide: map[string]failMode{},
					withAgent: rapid.Bool().Draw(rt, "decide")}
				lite := func(name string) store.Store {
					st, err := sqlite.Open(context.Background(), filepath.Join(dir, name+".db"))
					if err != nil {
						rt.Fatal(err)
					}
					return st
				}
				single := lite("single")
				defer single.Close()
				if pg != nil {
					w.batch = w.openSide(rt, "postgres/batch", fmt.Sprintf("diff-%d", n), pg)
				} else {
					batch := lite("batch")
					defer batch.Close()
					w.batch = w.openSide(rt, "sqlite/batch", "diff", batch)
				}
				w.single = w.openSide(rt, "sqlite/one-by-one", "diff", single)
				runDifferential(rt, w)
			})
		})
	}
}

// runDifferential is one run's steps.
func runDifferential(t *rapid.T, w *dWorld) {
	ctx := context.Background()
	copyOf := func(t *rapid.T, label string) (dEvent, bool, string) {
		e := drawEvent(t, label)
		alt := rapid.IntRange(0, 5).Draw(t, label+"Alt") == 0
		name := e.id
		if alt {
			name += "(B)"
		}
		return e, alt, name
	}
	body := func(e dEvent, alt bool) []byte {
		if alt {
			return e.alt
		}
		return e.body
	}
	t.Repeat(map[string]func(*rapid.T){
		"": func(*rapid.T) {},
		// Copies, as one batch on one side and one by one on the other.
		"deliver": func(t *rapid.T) {
			n := rapid.IntRange(1, 4).Draw(t, "copies")
			var raws [][]byte
			var names []string
			for i := range n {
				e, alt, name := copyOf(t, fmt.Sprintf("copy%d", i))
				raws, names = append(raws, body(e, alt)), append(names, name)
			}
			w.deliver(t, fmt.Sprintf("deliver %v", names), raws)
		},
		// From now on, the handler (or the agent) fails an event's runs,
		// or stops failing them.
		"fail": func(t *rapid.T) {
			e := drawEvent(t, "event")
			m := rapid.SampledFrom([]failMode{runOK, runTransient, runTransient, runPermanent}).Draw(t, "mode")
			agent := w.withAgent && rapid.Bool().Draw(t, "agent")
			w.mu.Lock()
			which := "handler"
			if agent {
				w.decide[e.id], which = m, "agent"
			} else {
				w.handler[e.id] = m
			}
			w.mu.Unlock()
			w.log = append(w.log, fmt.Sprintf("the %s's runs of %s: %s", which, e.id, m))
		},
		// Time passes (backoffs, holds), and a sweep may run.
		"tick": func(t *rapid.T) {
			d := rapid.SampledFrom([]time.Duration{time.Second, 5 * time.Second, time.Minute + time.Second}).Draw(t, "by")
			w.mu.Lock()
			w.now = w.now.Add(d)
			w.mu.Unlock()
			w.log = append(w.log, fmt.Sprintf("time passes: %s", d))
			if rapid.Bool().Draw(t, "sweep") {
				w.step(t, "sweep", func(s *dSide, _ bool) ([]string, error) {
					// Keys are swept in the order their holds began; two
					// that began at one instant come in either order, on
					// either side. Within a key the order is kept.
					rs, err := s.c.Sweep(ctx)
					lines := outcomeLines(rs)
					slices.SortStableFunc(lines, func(a, b string) int {
						ka, _, _ := strings.Cut(a, "-")
						kb, _, _ := strings.Cut(b, "-")
						return strings.Compare(ka, kb)
					})
					return lines, err
				})
			}
		},
		// An operator redrives or skips an event's open dead letter.
		"dlq": func(t *rapid.T) {
			e := drawEvent(t, "event")
			if w.batch.openDLQ(t, e.id) == 0 {
				t.Skip("no open dead letter")
			}
			skip := rapid.Bool().Draw(t, "skip")
			w.step(t, fmt.Sprintf("%s %s's dead letter", map[bool]string{true: "skip", false: "redrive"}[skip], e.id), func(s *dSide, _ bool) ([]string, error) {
				seq := s.openDLQ(t, e.id)
				if seq == 0 {
					return []string{"no open dead letter"}, nil
				}
				var rs []seqboxtype.Result
				var err error
				if skip {
					rs, err = s.c.Skip(ctx, seq, "diff", "test")
				} else {
					rs, err = s.c.Redrive(ctx, seq)
				}
				return outcomeLines(rs), err
			})
		},
		// An operator releases a key.
		"release": func(t *rapid.T) {
			k := rapid.SampledFrom([]string{"k1", "k2"}).Draw(t, "key")
			w.step(t, "release "+k, func(s *dSide, _ bool) ([]string, error) {
				rs, err := s.c.ReleaseKey(ctx, k, "diff", "test")
				if err != nil {
					return []string{"error: " + err.Error()}, nil
				}
				return outcomeLines(rs), nil
			})
		},
	})
}
