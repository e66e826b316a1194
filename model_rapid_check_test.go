package seqbox_test

// The invariants of TestRapidModel, checked over what the database, the
// queue and the fake remote side show after every step. They are the
// protocol model's (internal/model/invariants.go), stated over the real
// system's observable state.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/seqbox/seqbox/effects"
)

// snapshot is what the database and the queue hold for the run.
type snapshot struct {
	applied []appliedRow               // the handler's apply log, in commit order
	inbox   map[string]inboxRow        // by id
	dlq     map[string][]dlqRow        // by id
	gaps    map[string][][2]int64      // by key: [from, to]
	keys    map[string]keyRow          // by key
	parked  map[string][]string        // by id: reasons
	queued  map[string]int             // copies still in the queue, by id
	ledger  map[string]effects.State   // by id
	turns   map[string]bool            // ids holding a turn row
	decided map[string]string          // recorded decisions, by id
	audit   map[string]map[string]bool // by id: outcomes audited

	// The payload each record is bound to, by id: the recorded
	// decision's, the turn's, and the collisions audited (by hash).
	decidedHash map[string]string
	turnHash    map[string]string
	collided    map[string]map[string]bool
	// leases are the ledger's pending rows' lease_until (micros), by id.
	leases map[string]sql.NullInt64
	// readAt is the clock just before the snapshot, and liveCalls the
	// remote calls waiting, in a live process, both before and after it.
	readAt    time.Time
	liveCalls []*remoteCall
}

// querier runs the snapshot's queries: a connection pool (SQLite, every
// goroutine of the bubble blocked) or one REPEATABLE READ transaction
// (PostgreSQL, the processes still running).
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

type appliedRow struct {
	seq      int64
	id, key  string
	version  sql.NullInt64
	bk       string
	hash     string
	decision string
}

type inboxRow struct {
	outcome string
	key     string
	version sql.NullInt64
	hash    string
}

type dlqRow struct {
	seq           int64
	reason, state string
}

type keyRow struct {
	version   sql.NullInt64
	blocked   bool
	blockedID string
	reason    string
}

// read takes the snapshot. The caller made sure every goroutine of the
// bubble is blocked, so it is consistent.
func (w *world) read(ctx context.Context) (*snapshot, error) {
	var db, qdb querier = w.st.DB(), w.qdb
	qTable := "seqbox_queue"
	s := &snapshot{inbox: map[string]inboxRow{}, dlq: map[string][]dlqRow{}, gaps: map[string][][2]int64{},
		keys: map[string]keyRow{}, parked: map[string][]string{}, queued: map[string]int{}, ledger: map[string]effects.State{},
		turns: map[string]bool{}, decided: map[string]string{}, audit: map[string]map[string]bool{},
		decidedHash: map[string]string{}, turnHash: map[string]string{}, collided: map[string]map[string]bool{},
		leases: map[string]sql.NullInt64{}}
	before := w.remote.waiting()
	s.readAt = w.now()
	if w.pg {
		tx, err := w.st.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
		if err != nil {
			return nil, err
		}
		defer tx.Rollback() //nolint:errcheck // read only
		db, qdb, qTable = tx, tx, w.qTable
	}
	q := func(db querier, query string, scan func(*sql.Rows) error, args ...any) error {
		rows, err := db.QueryContext(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("%s: %w", query, err)
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	steps := []error{
		q(db, `SELECT seq, id, partitionkey, version, businesskey, hash, decision FROM rapid_applied ORDER BY seq`, func(r *sql.Rows) error {
			var a appliedRow
			err := r.Scan(&a.seq, &a.id, &a.key, &a.version, &a.bk, &a.hash, &a.decision)
			s.applied = append(s.applied, a)
			return err
		}),
		q(db, `SELECT id, outcome, partitionkey, objectversion, payload_hash FROM seqbox_inbox WHERE consumer = $1`, func(r *sql.Rows) error {
			var id string
			var in inboxRow
			err := r.Scan(&id, &in.outcome, &in.key, &in.version, &in.hash)
			s.inbox[id] = in
			return err
		}, rapidConsumer),
		q(db, `SELECT seq, id, reason, state FROM seqbox_dlq WHERE consumer = $1 ORDER BY seq`, func(r *sql.Rows) error {
			var id string
			var d dlqRow
			err := r.Scan(&d.seq, &id, &d.reason, &d.state)
			s.dlq[id] = append(s.dlq[id], d)
			return err
		}, rapidConsumer),
		q(db, `SELECT partitionkey, from_version, to_version FROM seqbox_gaps WHERE consumer = $1`, func(r *sql.Rows) error {
			var k string
			var g [2]int64
			err := r.Scan(&k, &g[0], &g[1])
			s.gaps[k] = append(s.gaps[k], g)
			return err
		}, rapidConsumer),
		q(db, `SELECT partitionkey, version, blocked, blocked_id, blocked_reason FROM seqbox_keys WHERE consumer = $1`, func(r *sql.Rows) error {
			var k string
			var kr keyRow
			err := r.Scan(&k, &kr.version, &kr.blocked, &kr.blockedID, &kr.reason)
			s.keys[k] = kr
			return err
		}, rapidConsumer),
		q(db, `SELECT id, reason FROM seqbox_parked WHERE consumer = $1`, func(r *sql.Rows) error {
			var id, reason string
			err := r.Scan(&id, &reason)
			s.parked[id] = append(s.parked[id], reason)
			return err
		}, rapidConsumer),
		q(db, `SELECT id, state, lease_until FROM seqbox_effects WHERE consumer = $1`, func(r *sql.Rows) error {
			var id string
			var st effects.State
			var lease sql.NullInt64
			err := r.Scan(&id, &st, &lease)
			s.ledger[id] = st
			s.leases[id] = lease
			return err
		}, rapidConsumer),
		q(db, `SELECT id, payload_hash FROM seqbox_retries WHERE consumer = $1`, func(r *sql.Rows) error {
			var id, h string
			err := r.Scan(&id, &h)
			s.turns[id] = true
			s.turnHash[id] = h
			return err
		}, rapidConsumer),
		q(db, `SELECT id, decision, payload_hash FROM seqbox_decisions WHERE consumer = $1`, func(r *sql.Rows) error {
			var id, d, h string
			err := r.Scan(&id, &d, &h)
			s.decided[id] = d
			s.decidedHash[id] = h
			return err
		}, rapidConsumer),
		q(db, `SELECT id, outcome, payload_hash FROM seqbox_audit WHERE consumer = $1`, func(r *sql.Rows) error {
			var id, o, h string
			err := r.Scan(&id, &o, &h)
			if s.audit[id] == nil {
				s.audit[id] = map[string]bool{}
			}
			s.audit[id][o] = true
			if o == "collision" {
				if s.collided[id] == nil {
					s.collided[id] = map[string]bool{}
				}
				s.collided[id][h] = true
			}
			return err
		}, rapidConsumer),
		q(qdb, `SELECT body FROM `+qTable, func(r *sql.Rows) error {
			var body []byte
			if err := r.Scan(&body); err != nil {
				return err
			}
			var ev struct{ ID string }
			if err := json.Unmarshal(body, &ev); err != nil {
				return fmt.Errorf("queue body %q: %w", body, err)
			}
			s.queued[ev.ID]++
			return nil
		}),
	}
	for _, err := range steps {
		if err != nil {
			return nil, err
		}
	}
	for _, c := range w.remote.waiting() {
		if slices.Contains(before, c) && !c.proc.dead.Load() {
			s.liveCalls = append(s.liveCalls, c)
		}
	}
	return s, nil
}

// skipped reports whether e's dead letter was skipped by an operator.
func (s *snapshot) skipped(id string) bool {
	return slices.ContainsFunc(s.dlq[id], func(d dlqRow) bool { return d.state == "skipped" })
}

// accounted reports whether version v of key k, passed over by a later
// applied version, is on record: a gap covering it, or its event's
// stale, expired, semantic_duplicate or dead-lettered outcome, or a dead
// letter (open, skipped or redriven).
func (w *world) accounted(s *snapshot, k string, v int64) (bool, string) {
	for _, g := range s.gaps[k] {
		if g[0] <= v && v <= g[1] {
			return true, fmt.Sprintf("gap %d..%d", g[0], g[1])
		}
	}
	for _, e := range w.events {
		if e.key != k || int64(e.ver) != v {
			continue
		}
		if in, ok := s.inbox[e.id]; ok && slices.Contains([]string{"stale", "expired", "semantic_duplicate", "dead_lettered"}, in.outcome) {
			return true, in.outcome
		}
		if len(s.dlq[e.id]) > 0 {
			return true, "dead letter " + s.dlq[e.id][0].state
		}
	}
	return false, ""
}

// check verifies every invariant over s and the remote side, and returns
// the violations.
func (w *world) check(s *snapshot) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	// At most one applied effect per identity, and the apply log and the
	// inbox agree (they commit in one transaction).
	perID := map[string]int{}
	perBK := map[string][]string{}
	for _, a := range s.applied {
		perID[a.id]++
		if a.bk != "" {
			perBK[a.bk] = append(perBK[a.bk], a.id)
		}
	}
	for id, n := range perID {
		if n > 1 {
			fail("at most one effect per identity: %s applied %d times", id, n)
		}
		if s.inbox[id].outcome != "applied" {
			fail("the effect and the identity commit together: %s has an effect but its inbox outcome is %q", id, s.inbox[id].outcome)
		}
		if w.byID[id] == nil {
			fail("%s applied but never published", id)
		}
	}
	for id, in := range s.inbox {
		// The scenario never reuses a version for another identity, and
		// a collision (a copy with another payload) never becomes the
		// identity's outcome.
		if in.outcome == "collision" || in.outcome == "version_conflict" {
			fail("no %s without a cause: %s ended %s, though no other identity ever carried its version and no other payload its id (audit %v, gaps %v)",
				in.outcome, id, in.outcome, s.audit[id], s.gaps[in.key])
		}
		if in.outcome == "applied" && perID[id] == 0 {
			fail("the effect and the identity commit together: %s is applied in the inbox with no effect", id)
		}
		if w.byID[id] == nil {
			fail("inbox row %s was never published", id)
		} else if i := w.byID[id].idx; w.published[i]+w.delivered[i] == 0 {
			fail("inbox row %s before any copy of it was published", id)
		}
	}
	// At most one effect per business key, here and at the remote side.
	for bk, ids := range perBK {
		if len(ids) > 1 {
			fail("at most one effect per business key: %s applied by %v", bk, ids)
		}
	}
	w.remote.mu.Lock()
	remoteBK := map[string][]string{}
	for key, n := range w.remote.applied {
		e := w.remote.events[key]
		if n > 1 {
			fail("at most one remote effect per idempotency key: the remote side applied %s's call %d times (%d requests)", e, n, w.remote.requests[key])
		}
		if n > 0 && e.bk != "" {
			remoteBK[e.bk] = append(remoteBK[e.bk], e.id)
		}
	}
	for bk, ids := range remoteBK {
		if len(ids) > 1 {
			slices.Sort(ids)
			fail("at most one remote effect per business key: %s applied at the remote side for %v", bk, ids)
		}
	}
	// Applied only what the agent did: the decision applied is the
	// remote side's reference for the identity's call (a consumer
	// without Decide has no agent: its handler applies alone).
	for _, a := range s.applied {
		if w.cfg.noDecide {
			break
		}
		key := effects.Key(rapidConsumer, rapidSource, a.id, rapidAction)
		if w.remote.applied[key] == 0 {
			fail("applied only what the agent did: %s applied (decision %q) with no effect at the remote side", a.id, a.decision)
		} else if a.decision != w.remote.refs[key] {
			fail("applied only what the agent did: %s applied decision %q, the remote side holds %q", a.id, a.decision, w.remote.refs[key])
		}
		// The applied envelope is the one the agent saw: the remote side
		// received that payload, and only that one, under the identity's
		// idempotency key; the decision applied was made for it.
		e := w.byID[a.id]
		if e == nil {
			continue
		}
		for h := range w.remote.hashes[key] {
			if h != a.hash {
				fail("the applied envelope is the one the agent saw: %s applied %s, but the remote side received %s under its idempotency key",
					a.id, e.hashName(a.hash), e.hashName(h))
			}
		}
		if len(a.hash) >= 8 && !strings.Contains(a.decision, a.hash[:8]) {
			fail("the applied envelope is the one the agent saw: %s applied %s with decision %q, made for another payload", a.id, e.hashName(a.hash), a.decision)
		}
		if h, ok := s.decidedHash[a.id]; ok && h != a.hash {
			fail("a decision is bound to its payload: %s applied %s with the decision recorded for %s", a.id, e.hashName(a.hash), e.hashName(h))
		}
		if in, ok := s.inbox[a.id]; ok && in.hash != a.hash {
			fail("the applied envelope is the one recorded: %s applied %s, its inbox row holds %s", a.id, e.hashName(a.hash), e.hashName(in.hash))
		}
	}
	// The outcome follows the effect: an event whose call took effect at
	// the remote side is never undone by the business deadline (the
	// deadline is checked before the call, never after it), whether its
	// caller got the answer or died with it: a dead caller's call is
	// reconciled, not expired (docs/design.md §10.1).
	for key, n := range w.remote.applied {
		if e := w.remote.events[key]; n > 0 && s.inbox[e.id].outcome == "expired" {
			fail("the outcome follows the effect: %s's call took effect at the remote side, and %s ended expired", e, e)
		}
	}
	// One payload per idempotency key at the remote side.
	for key, hs := range w.remote.hashes {
		if len(hs) > 1 {
			fail("one payload per identity at the agent: the remote side received %d payloads under the idempotency key of %s", len(hs), w.remote.events[key])
		}
	}
	w.remote.mu.Unlock()

	// The payload an identity is bound to (its inbox row's, else its
	// turn's, else its recorded decision's) is the one the agent was asked
	// about, the one its decision was made for, and never a collision; a
	// collision is audited only for a payload that was published under
	// the identity besides another one.
	for _, e := range w.events {
		bound, what := "", ""
		if in, ok := s.inbox[e.id]; ok {
			bound, what = in.hash, "its inbox row"
		} else if h := s.turnHash[e.id]; h != "" {
			bound, what = h, "its turn"
		} else if h := s.decidedHash[e.id]; h != "" {
			bound, what = h, "its recorded decision"
		}
		if bound != "" {
			if h, ok := s.decidedHash[e.id]; ok && h != bound {
				fail("a decision is bound to its payload: %s's decision was made for %s, %s holds %s", e, e.hashName(h), what, e.hashName(bound))
			}
			if h := s.turnHash[e.id]; h != "" && h != bound {
				fail("a turn is bound to its payload: %s's turn is bound to %s, %s holds %s", e, e.hashName(h), what, e.hashName(bound))
			}
			for h := range w.agent.hashesAsked(e.id) {
				if h != bound {
					fail("the copy the agent received is the identity's: the agent was asked about %s of %s, %s holds %s", e.hashName(h), e, what, e.hashName(bound))
				}
			}
			if s.collided[e.id][bound] {
				fail("the identity's copy is never a collision: %s's %s (%s) was audited a collision", e, e.hashName(bound), what)
			}
		}
		for h := range s.collided[e.id] {
			if !w.pubHashes[e.id][h] || len(w.pubHashes[e.id]) < 2 {
				fail("no collision without a cause: %s audited a collision for %s, though no other payload was published under its id", e, e.hashName(h))
			}
		}
	}

	// A ledger lease follows liveness: a call still running in a live
	// process keeps its pending row's lease ahead of the clock (a lease
	// that stopped renewing makes a running call look dead, and another
	// caller would call again).
	for _, c := range s.liveCalls {
		st, lease := s.ledger[c.ev.id], s.leases[c.ev.id]
		switch {
		case st != effects.Pending:
			fail("a ledger lease follows liveness: %s's call #%d still runs in live %s, its ledger row is %s", c.ev, c.seq, c.proc, st)
		case !lease.Valid || lease.Int64 <= s.readAt.UnixMicro():
			fail("a ledger lease follows liveness: %s's call #%d still runs in live %s, its ledger row's lease ran out %s ago",
				c.ev, c.seq, c.proc, s.readAt.Sub(time.UnixMicro(lease.Int64)))
		}
	}

	bad = append(bad, w.checkTurnOrder(s)...)

	// Per versioned key, applied versions strictly increase, and a
	// version passed over is on record.
	last := map[string]int64{}
	for _, a := range s.applied {
		if !a.version.Valid {
			continue
		}
		v := a.version.Int64
		prev, seen := last[a.key]
		switch {
		case seen && v <= prev:
			fail("per key, effects follow the version order: %s (version %d) applied after version %d", a.id, v, prev)
		case seen:
			for u := prev + 1; u < v; u++ {
				if ok, _ := w.accounted(s, a.key, u); !ok {
					fail("no silent skip: %s (version %d) applied over version %d of %s with no gap, skip, stale or dead letter on record", a.id, v, u, a.key)
				}
			}
		case w.cfg.firstVersion:
			for u := int64(1); u < v; u++ {
				if ok, _ := w.accounted(s, a.key, u); !ok {
					fail("no silent skip: %s (version %d) is the first applied of %s, but version %d is not on record (FirstVersion 1)", a.id, v, a.key, u)
				}
			}
		}
		last[a.key] = v
	}

	// ACK only after COMMIT: a copy gone from the queue was acknowledged,
	// so the database committed an outcome for its identity (a collision:
	// its audit row, the identity being another copy's).
	for _, e := range w.events {
		acked := w.published[e.idx] - s.queued[e.id]
		if acked < 0 {
			fail("the queue holds %d copies of %s, %d were published", s.queued[e.id], e, w.published[e.idx])
		}
		if acked > 0 {
			if _, ok := s.inbox[e.id]; !ok && len(s.dlq[e.id]) == 0 && len(s.collided[e.id]) == 0 {
				fail("ACK only after COMMIT: %d copies of %s acknowledged with nothing committed for it", acked, e)
			}
		}
	}

	// A poison message blocks only its own key.
	for k, kr := range s.keys {
		if kr.blocked && kr.blockedID != "" {
			if e := w.byID[kr.blockedID]; e == nil || e.key != k {
				fail("a message blocks only its own key: %s is blocked by %s", k, kr.blockedID)
			}
		}
	}

	// Dead letters carry their reason.
	for id, ds := range s.dlq {
		for _, d := range ds {
			if strings.TrimSpace(d.reason) == "" {
				fail("dead letter %d of %s has no reason", d.seq, id)
			}
		}
	}
	return bad
}

// finalOutcomes are the inbox outcomes an identity keeps.
var finalOutcomes = []string{"applied", "semantic_duplicate", "stale", "expired", "dead_lettered"}

// checkTurnOrder: one turn per key, in the apply log, whatever asked the
// agent or not. An identity seen holding its key's turn at the last
// check (a retry row, its inbox row missing or not final) keeps it until
// it settles: a message of its key without an objectversion applied
// since then must come after its effect in the log, unless it settled
// without one (dead-lettered, expired, a semantic duplicate, stale) or
// its turn was ended or redriven (a dead letter of it on record). The
// agent's own log checks the same at the moment an agent is asked; this
// covers a consumer without Decide, whose handler is its only step
// (found missing when a batch applied a message ahead of its key's
// retrying holder: TestRetryingMessageWhoseCopyIsInTheBatchKeepsTheTurn).
// A versioned message is left to the version order checked below.
func (w *world) checkTurnOrder(s *snapshot) []string {
	var bad []string
	appliedAt := map[string]int64{}
	for _, a := range s.applied {
		appliedAt[a.id] = a.seq
	}
	for _, a := range s.applied {
		if a.seq <= w.appliedSeen || a.key == "" || a.version.Valid {
			continue
		}
		for _, h := range w.holders[a.key] {
			if h == a.id || len(s.dlq[h]) > 0 {
				continue
			}
			in, ok := s.inbox[h]
			switch {
			case ok && in.outcome == "applied" && appliedAt[h] < a.seq:
			case ok && in.outcome != "applied" && slices.Contains(finalOutcomes, in.outcome):
			default:
				what := "no inbox row"
				if ok {
					what = "inbox " + in.outcome
				}
				if ok && in.outcome == "applied" {
					what = fmt.Sprintf("applied after it (apply log %d, %s at %d)", appliedAt[h], a.id, a.seq)
				}
				bad = append(bad, fmt.Sprintf("one turn per key: %s applied while %s held %s's turn (seen at the last check; now: %s)", a.id, h, a.key, what))
			}
		}
	}
	w.holders = map[string][]string{}
	for id := range s.turns {
		e := w.byID[id]
		if e == nil || e.key == "" {
			continue
		}
		if in, ok := s.inbox[id]; ok && slices.Contains(finalOutcomes, in.outcome) {
			continue
		}
		w.holders[e.key] = append(w.holders[e.key], id)
	}
	for _, a := range s.applied {
		w.appliedSeen = max(w.appliedSeen, a.seq)
	}
	return bad
}

// quietCheck verifies, once everything settled, that every payload
// published under an identity but the one it is bound to (the copy the
// agent received, when it was asked) ended a collision.
func (w *world) quietCheck(s *snapshot) []string {
	var bad []string
	for _, e := range w.events {
		in, ok := s.inbox[e.id]
		if !ok {
			continue
		}
		for h := range w.pubHashes[e.id] {
			if h != in.hash && !s.collided[e.id][h] {
				bad = append(bad, fmt.Sprintf("every other payload ends a collision: %s's %s was published, the identity holds %s (%s), and no collision of it is on record (audit %v)",
					e, e.hashName(h), e.hashName(in.hash), in.outcome, s.audit[e.id]))
			}
		}
	}
	return bad
}

// describe is every event's state in s, for a failure message.
func (w *world) describe(s *snapshot) string {
	var out []string
	for _, e := range w.events {
		in, ok := s.inbox[e.id]
		what := "no inbox row"
		if ok {
			what = "inbox " + in.outcome
		}
		out = append(out, fmt.Sprintf("%s: %s, dlq %v, parked %v, turn %v, decided %v, ledger %q, queued %d, published %d, remote effects %d",
			e.id, what, s.dlq[e.id], s.parked[e.id], s.turns[e.id], s.decided[e.id] != "", s.ledger[e.id], s.queued[e.id],
			w.published[e.idx], w.remote.appliedFor(e)))
	}
	for k, kr := range s.keys {
		out = append(out, fmt.Sprintf("key %s: version %v, blocked %v by %q (%s), gaps %v", k, kr.version.Int64, kr.blocked, kr.blockedID, kr.reason, s.gaps[k]))
	}
	return strings.Join(out, "\n    ")
}

// stillMoving lists the published identities without a final outcome that
// are not parked behind a blocked key, and anything else still moving
// (copies in the queue, calls at the remote side, asks in flight).
func (w *world) stillMoving(s *snapshot) []string {
	var out []string
	for _, e := range w.events {
		if w.published[e.idx] == 0 {
			out = append(out, e.id+": never published")
			continue
		}
		in, ok := s.inbox[e.id]
		switch {
		case ok && slices.Contains([]string{"applied", "semantic_duplicate", "stale", "expired"}, in.outcome):
		case ok && in.outcome == "dead_lettered" && len(s.dlq[e.id]) > 0:
		case s.skipped(e.id):
		case ok && (in.outcome == "blocked" || in.outcome == "held") && e.key != "" && s.keys[e.key].blocked && len(s.parked[e.id]) > 0:
			// parked behind a blocked key: the operator's to decide
		default:
			what := "no inbox row"
			if ok {
				what = "inbox " + in.outcome
			}
			out = append(out, fmt.Sprintf("%s: %s, dlq %v, parked %v, turn %v, ledger %q, queued %d",
				e.id, what, s.dlq[e.id], s.parked[e.id], s.turns[e.id], s.ledger[e.id], s.queued[e.id]))
		}
		if s.queued[e.id] > 0 {
			out = append(out, fmt.Sprintf("%s: %d copies still in the queue", e.id, s.queued[e.id]))
		}
	}
	if n := len(w.remote.waiting()); n > 0 {
		out = append(out, fmt.Sprintf("%d calls waiting at the remote side", n))
	}
	if n := w.agent.busy(); n > 0 {
		out = append(out, fmt.Sprintf("%d asks in flight", n))
	}
	return out
}
