package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/store"
)

// The serve target's workloads of issue 36 (docs/design.md §10.5), each
// with its oracle:
//
//   - racing copies (every scenario): one id posted with other payloads at
//     the same instant to both serve processes, under one partition key or
//     under one key per copy. The agent receives the id once (one
//     Idempotency-Key, one payload); the envelope the gateway recorded as
//     applied (seqbox_gateway_envelopes) is the one the agent received;
//     every other copy is parked as a collision.
//   - cross-key business-key pairs (every scenario): two ids on two
//     partition keys with one businesskey, posted at the same instant to
//     the two processes. The business key reaches the agent under one
//     event; the other is a semantic duplicate.
//   - retry-after-storm: the agent answers 429 or 503 with Retry-After: 3
//     to the first calls of a few keys' events. Other keys' events are
//     dispatched and applied while a storm event waits for its next call
//     (an ordering check on the agent's own clock: no refusal is followed
//     by a stretch without a healthy apply until the storm event is called
//     again, while healthy work still came after it); nothing that is not
//     poison is dead-lettered.
//   - lying-head: for 12 s the agent answers HEAD 200 and every POST 503,
//     then recovers. Nothing that is not poison is dead-lettered.
//   - dropped-message: the first call of one versioned and one unversioned
//     event hangs at the agent; both serve processes are SIGKILLed and the
//     event's queue row is deleted (a broker that dropped it), so nothing
//     redelivers the event holding its key's turn. The key's later events
//     end applied after the turn ends (the sweep, after the short
//     --redelivery-window); the dropped event ends dead-lettered, resolved
//     as skipped.

const (
	stormScenario = "retry-after-storm"
	lieScenario   = "lying-head"
	dropScenario  = "dropped-message"
)

// workloadScenarios are the scenarios with a workload of their own; they
// deal random kills as the random scenario does.
var workloadScenarios = []string{stormScenario, lieScenario, dropScenario}

func isWorkloadScenario(name string) bool {
	for _, s := range workloadScenarios {
		if s == name {
			return true
		}
	}
	return false
}

// stormKeys are the keys whose events the agent refuses with Retry-After
// in the storm scenario: two versioned, one without objectversion.
var stormKeys = []string{"lead-00", "lead-01", "lead-02"}

const (
	stormPerKey   = 6 // refusals per storm key
	stormPerEvent = 2 // refusals per event of a storm key
	lieFor        = 12 * time.Second
)

// timedApply is one effect, with when its call arrived and when it was
// applied.
type timedApply struct {
	key         string
	arrived, at time.Time
}

// refusal is one Retry-After answer of the storm.
type refusal struct {
	id, key string
	at      time.Time
}

// agentWorkloads is the agent's side of the workloads; a.mu guards it.
type agentWorkloads struct {
	// data: the data of the call that applied each event id.
	data map[string]string
	// arrivals: when each event id's calls arrived; calls: every call's
	// key and arrival, in order.
	arrivals map[string][]time.Time
	calls    []timedApply
	// answered: each event id's first call that the agent applied (or
	// found applied) and whose 200 reached the gateway: its arrival and
	// its answer.
	answered map[string]timedApply
	// failed: per event id, each of its calls the agent answered with a
	// failure, or answered too late or not at all (why, in order).
	failed map[string][]string
	// storm: refusals left per key, given per event, and those given.
	stormLeft  map[string]int
	stormGiven map[string]int
	refusals   []refusal
	// lieFrom, lieUntil: the window of the lying HEAD (UnixNano).
	lieFrom, lieUntil int64
	// victims: the event ids whose first call hangs (dropped-message);
	// hit announces one, release lets its call end unapplied.
	victims map[string]bool
	hung    map[string]chan struct{}
	hit     chan string
}

func (w *agentWorkloads) init() {
	w.data, w.arrivals, w.answered = map[string]string{}, map[string][]time.Time{}, map[string]timedApply{}
	w.failed = map[string][]string{}
	w.stormLeft, w.stormGiven = map[string]int{}, map[string]int{}
	w.victims, w.hung, w.hit = map[string]bool{}, map[string]chan struct{}{}, make(chan string, 8)
}

// failedCall records that the agent failed a call of event id (why).
func (a *faultyAgent) failedCall(id, why string) {
	a.mu.Lock()
	a.w.failed[id] = append(a.w.failed[id], why)
	a.mu.Unlock()
}

// failures says how the agent failed event id's calls, for a dead
// letter's report: the count and the kinds.
func (a *faultyAgent) failures(id string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Sprintf("the agent failed %d of its %d calls %v", len(a.w.failed[id]), len(a.w.arrivals[id]), a.w.failed[id])
}

func (a *faultyAgent) arrived(ev agentEvent) time.Time {
	now := time.Now()
	a.mu.Lock()
	a.w.arrivals[ev.ID] = append(a.w.arrivals[ev.ID], now)
	a.w.calls = append(a.w.calls, timedApply{key: ev.PartitionKey, arrived: now})
	a.mu.Unlock()
	return now
}

// lie makes HEAD answer 200 and POST 503 from now for d.
func (a *faultyAgent) lie(d time.Duration) {
	a.mu.Lock()
	a.w.lieFrom, a.w.lieUntil = time.Now().UnixNano(), time.Now().Add(d).UnixNano()
	a.mu.Unlock()
}

func (a *faultyAgent) lying() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now().UnixNano()
	return now >= a.w.lieFrom && now < a.w.lieUntil
}

// storm answers a storm key's event 429 or 503 with Retry-After while
// the key has refusals left; it reports whether it answered.
func (a *faultyAgent) storm(w http.ResponseWriter, ev agentEvent) bool {
	a.mu.Lock()
	if a.w.stormLeft[ev.PartitionKey] <= 0 || a.w.stormGiven[ev.ID] >= stormPerEvent {
		a.mu.Unlock()
		return false
	}
	a.w.stormLeft[ev.PartitionKey]--
	a.w.stormGiven[ev.ID]++
	code := http.StatusTooManyRequests
	if len(a.w.refusals)%3 == 2 {
		code = http.StatusServiceUnavailable
	}
	a.w.refusals = append(a.w.refusals, refusal{id: ev.ID, key: ev.PartitionKey, at: time.Now()})
	a.w.failed[ev.ID] = append(a.w.failed[ev.ID], fmt.Sprintf("storm %d", code))
	a.mu.Unlock()
	w.Header().Set("Retry-After", "3")
	w.WriteHeader(code)
	return true
}

// dropped hangs a victim's first call until the harness has killed serve
// and deleted the victim's queue row, then breaks the connection without
// applying; it reports whether it did.
func (a *faultyAgent) dropped(w http.ResponseWriter, ev agentEvent) bool {
	a.mu.Lock()
	if !a.w.victims[ev.ID] || a.w.hung[ev.ID] != nil {
		a.mu.Unlock()
		return false
	}
	release := make(chan struct{})
	a.w.hung[ev.ID] = release
	a.mu.Unlock()
	a.w.hit <- ev.ID
	a.failedCall(ev.ID, "dropped")
	select {
	case <-release:
	case <-time.After(time.Minute):
	}
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return true
		}
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	return true
}

func (a *faultyAgent) release(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.w.hung[id]; c != nil {
		close(c)
	}
}

// raceGroup is one id posted with several payloads at once.
type raceGroup struct {
	id     string
	copies []serveEvent
}

// addRaces adds the racing copies and the cross-key business-key pairs to
// the workload: n of each.
func (wl *serveWorkload) addRaces(seed uint64, n int) {
	r := rand.New(rand.NewPCG(seed, 11))
	body := func(id, key, bk, data string) []byte {
		m := map[string]any{"specversion": "1.0", "id": id, "source": "chaos", "type": "lead.updated",
			"partitionkey": key, "data": json.RawMessage(data)}
		if bk != "" {
			m["businesskey"] = bk
		}
		b, _ := json.Marshal(m)
		return b
	}
	for g := range n {
		id := fmt.Sprintf("race-%04d", g)
		copies := 2 + r.IntN(2)
		grp := raceGroup{id: id}
		for c := range copies {
			key := fmt.Sprintf("rk-%04d", g)
			if g%2 == 1 {
				key = fmt.Sprintf("rk-%04d-%c", g, 'a'+c) // one partition key per copy
			}
			ev := serveEvent{id: id, key: key, body: body(id, key, "", fmt.Sprintf(`{"copy":%d}`, c)), original: c == 0}
			grp.copies = append(grp.copies, ev)
		}
		wl.races = append(wl.races, grp)
		wl.originals = append(wl.originals, grp.copies[0])
	}
	for g := range n {
		bk := fmt.Sprintf("bkpair-%04d", g)
		var pair [2]serveEvent
		for c := range 2 {
			id, key := fmt.Sprintf("bkp-%04d-%c", g, 'a'+c), fmt.Sprintf("bkpk-%04d-%c", g, 'a'+c)
			pair[c] = serveEvent{id: id, key: key, bk: bk, body: body(id, key, bk, fmt.Sprintf(`{"pair":%d}`, c)), original: c == 0}
			wl.bkGroups[bk] = append(wl.bkGroups[bk], id)
		}
		wl.pairs = append(wl.pairs, pair)
		wl.originals = append(wl.originals, pair[0])
	}
}

// pickVictims picks, on keys 1 (versioned) and 2 (without objectversion),
// an event with later events of its key, no business key, no poison and
// no copy posted after it: the messages the dropped-message scenario
// drops.
func (wl *serveWorkload) pickVictims() {
	wl.victims = map[string]serveEvent{}
	for _, k := range []int{1, 2} {
		if k >= len(wl.byKey) {
			return
		}
		evs := wl.byKey[k]
		seen := 0
		for i, ev := range evs {
			if !ev.original {
				continue
			}
			seen++
			later := 0
			for _, e := range evs[i+1:] {
				if e.original {
					later++
				}
			}
			if seen >= 3 && later >= 2 && ev.bk == "" && !isPoison(ev) && (i+1 == len(evs) || evs[i+1].id != ev.id) {
				wl.victims[ev.id] = ev
				break
			}
		}
	}
}

func isPoison(ev serveEvent) bool { return bytes.Contains(ev.body, []byte(`"poison":true`)) }

// postTo sends one event to serve process i first, then to the other
// while i is down.
func (s *serveRun) postTo(ctx context.Context, i int, body []byte) error {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		s.mu.Lock()
		addr := s.addrs[(i+attempt)%len(s.addrs)]
		s.mu.Unlock()
		resp, err := s.client.Post("http://"+addr+"/v1/events", "application/cloudevents+json", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusAccepted, http.StatusOK:
				// Queued now, or a copy queued before (an earlier attempt
				// committed before its answer was lost).
				s.accepted(body)
				return nil
			case http.StatusConflict:
				return nil // a collision, refused and recorded at ingest
			}
			if resp.StatusCode < 500 {
				return fmt.Errorf("ingest answered %s for %s", resp.Status, body)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ctx.Err()
}

// postRaces posts each racing group and each business-key pair, its
// members at the same instant, one to each serve process.
func (s *serveRun) postRaces(ctx context.Context, wl serveWorkload) error {
	groups := make([][]serveEvent, 0, len(wl.races)+len(wl.pairs))
	for i := range max(len(wl.races), len(wl.pairs)) {
		if i < len(wl.races) {
			groups = append(groups, wl.races[i].copies)
		}
		if i < len(wl.pairs) {
			groups = append(groups, wl.pairs[i][:])
		}
	}
	for gi, g := range groups {
		start := make(chan struct{})
		errs := make(chan error, len(g))
		var wg sync.WaitGroup
		for c, ev := range g {
			wg.Go(func() {
				<-start
				errs <- s.postTo(ctx, (c+gi)%2, ev.body)
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(s.h.r.IntN(40)) * time.Millisecond):
		}
	}
	return nil
}

// dropLoop drops each victim as its call reaches the agent: both serve
// processes are SIGKILLed, the victim's queue rows deleted, then the
// agent's call ends unapplied and the processes are restarted (by
// killLoop).
func (s *serveRun) dropLoop(ctx context.Context) {
	for range len(s.victims) {
		var id string
		select {
		case <-ctx.Done():
			return
		case id = <-s.agent.w.hit:
		}
		s.restarts.Lock()
		s.mu.Lock()
		procs := s.procs
		s.mu.Unlock()
		for _, p := range procs {
			if p != nil && !p.exited() {
				p.kill()
			}
		}
		n, err := s.deleteQueued(ctx, id)
		if err != nil {
			s.res.fail("drop %s: %v", id, err)
		}
		parked := false
		if n == 0 && err == nil {
			if parked, err = s.parkedNow(ctx, id); err != nil {
				s.res.fail("drop %s: %v", id, err)
			}
		}
		s.mu.Lock()
		s.droppedRows[id] = n
		s.parkedVictims[id] = parked
		s.mu.Unlock()
		s.h.progress("%s: dropped %s (%d queue rows) with both serve processes killed", s.name, id, n)
		s.agent.release(id)
		s.restarts.Unlock()
	}
}

// notDroppable reports a victim whose call hung while the queue held no
// row of it, and seqbox's parked table did: the broker no longer had the
// message to drop (serveRun.victims).
func (s *serveRun) notDroppable(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parkedVictims[id]
}

// deleteQueued deletes the queue rows of event id (a broker that drops
// the message) and returns how many it deleted.
func (s *serveRun) deleteQueued(ctx context.Context, id string) (int, error) {
	st, err := dbopen.StoreAccess(ctx, s.db, store.Adopt)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	rows, err := st.DB().QueryContext(ctx, `SELECT seq, body FROM seqbox_queue`)
	if err != nil {
		return 0, err
	}
	var seqs []int64
	needle := []byte(`"id":"` + id + `"`)
	for rows.Next() {
		var seq int64
		var body []byte
		if err := rows.Scan(&seq, &body); err != nil {
			rows.Close()
			return 0, err
		}
		if bytes.Contains(body, needle) {
			seqs = append(seqs, seq)
		}
	}
	rows.Close()
	for _, seq := range seqs {
		if _, err := st.DB().ExecContext(ctx, `DELETE FROM seqbox_queue WHERE seq = $1`, seq); err != nil {
			return 0, err
		}
	}
	return len(seqs), nil
}

// parkedNow reports whether event id is in seqbox's parked table, let
// out to be decided (its call is the one that hung).
func (s *serveRun) parkedNow(ctx context.Context, id string) (bool, error) {
	st, err := dbopen.StoreAccess(ctx, s.db, store.Adopt)
	if err != nil {
		return false, err
	}
	defer st.Close()
	var n int
	err = st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_parked WHERE source = 'chaos' AND id = $1`, id).Scan(&n)
	return n > 0, err
}

// extraServeArgs are a scenario's own serve flags. dropped-message: a
// redelivery window the sweep can see pass (10 s, well above the lease of
// 2 s plus the retry backoff cap of 2 s that bound a live message's
// absence), a short hold, and holds that advance with a recorded gap.
func (s *serveRun) extraServeArgs() []string {
	switch s.name {
	case dropScenario:
		return []string{"--redelivery-window", "10s", "--hold-timeout", "3s", "--hold-expiry", "advance"}
	case stormScenario:
		// The storm spends two attempts of each event of its keys on
		// purpose, and the agent's random faults (about one call in six:
		// 503, 429, too slow, answer lost) come from a seeded stream: at
		// a run's tail, a storm event's calls are almost the only ones and
		// take that stream's draws in a row, so one run of bad draws meets
		// the same event run after run. With seed 6, e00008 spent 2 to 5
		// attempts on eleven quiet or loaded runs, and all 8 once in CI
		// (its reasons were not kept; the oracle's report now names the
		// agent's failures). The oracle is that the storm dead-letters
		// nothing; the budget bounds the random faults an event survives
		// on top of it.
		return []string{"--max-attempts", "24"}
	case lieScenario:
		// The circuit is a process's own and starts closed: each serve
		// restarted during the lie spends up to three calls (attempts of
		// the events in hand) before it opens, and each half-open trial
		// one more. With kills landing in the 12 s lie, 8 attempts were
		// once not enough on PostgreSQL (e00009, 8 of 8). The oracle is
		// that the lie dead-letters nothing while processes live and
		// die; the attempts bound how many restarts an event survives.
		return []string{"--max-attempts", "24"}
	}
	return nil
}

// verifyWorkloads checks the oracles of the workloads (the comment at the
// top of this file).
func (s *serveRun) verifyWorkloads(ctx context.Context, st store.Store, wl serveWorkload, outcome map[string]string) {
	s.verifyRaces(ctx, st, wl)
	for _, p := range wl.pairs {
		if o := outcome[p[1].id]; o != "applied" && o != "semantic_duplicate" {
			s.res.fail("business-key pair %s: %s ended %q", p[1].bk, p[1].id, o)
		}
	}
	switch s.name {
	case stormScenario:
		s.verifyStorm(wl)
		s.verifyNoDeadLetter(ctx, st, wl)
	case lieScenario:
		s.verifyNoDeadLetter(ctx, st, wl)
	case dropScenario:
		s.verifyDropped(ctx, st, wl, outcome)
	}
}

// verifyRaces: the envelope recorded as applied is the copy the agent
// received, and every other copy is parked as a collision.
func (s *serveRun) verifyRaces(ctx context.Context, st store.Store, wl serveWorkload) {
	if len(wl.races) == 0 {
		return
	}
	copyOf := func(data string) int {
		var d struct {
			Copy *int `json:"copy"`
		}
		if json.Unmarshal([]byte(data), &d) != nil || d.Copy == nil {
			return -1
		}
		return *d.Copy
	}
	recorded := map[string]int{}
	rows, err := st.DB().QueryContext(ctx, `SELECT id, envelope FROM seqbox_gateway_envelopes WHERE source = 'chaos' AND id LIKE 'race-%'`)
	if err != nil {
		s.res.fail("read the envelopes: %v", err)
		return
	}
	for rows.Next() {
		var id, env string
		if err := rows.Scan(&id, &env); err != nil {
			s.res.fail("%v", err)
		}
		var e struct {
			Data json.RawMessage `json:"data"`
		}
		_ = json.Unmarshal([]byte(env), &e)
		recorded[id] = copyOf(string(e.Data))
	}
	rows.Close()
	collisions := map[string]int{}
	rows, err = st.DB().QueryContext(ctx, `SELECT id, COUNT(DISTINCT payload_hash) FROM seqbox_parked
		WHERE source = 'chaos' AND reason = 'collision' AND id LIKE 'race-%' GROUP BY id`)
	if err != nil {
		s.res.fail("read the collisions: %v", err)
		return
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			s.res.fail("%v", err)
		}
		collisions[id] = n
	}
	rows.Close()
	s.agent.mu.Lock()
	sent := map[string]int{}
	for _, g := range wl.races {
		if d, ok := s.agent.w.data[g.id]; ok {
			sent[g.id] = copyOf(d)
		}
	}
	s.agent.mu.Unlock()
	for _, g := range wl.races {
		got, ok := sent[g.id]
		if !ok {
			continue // reported by the oracle of every event
		}
		if rec, ok := recorded[g.id]; !ok || rec != got {
			s.res.fail("racing copies of %s: the agent received copy %d but the gateway recorded copy %d as applied", g.id, got, rec)
		}
		if n := collisions[g.id]; n != len(g.copies)-1 {
			s.res.fail("racing copies of %s: %d copies, %d parked as a collision (want %d)", g.id, len(g.copies), n, len(g.copies)-1)
		}
	}
}

// accepted records when an event id was first accepted.
func (s *serveRun) accepted(body []byte) {
	var ev struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &ev)
	now := time.Now()
	s.mu.Lock()
	if _, ok := s.acceptedAt[ev.ID]; !ok {
		s.acceptedAt[ev.ID] = now
	}
	s.mu.Unlock()
}

// stormSlack is how long after a refusal a call that was already on its
// way may still arrive at the agent; the oracle looks past it.
const stormSlack = 500 * time.Millisecond

// verifyStorm: a Retry-After delays its own event (and so its key), never
// the other keys. The oracle is causal, on the agent's clock: a refusal
// starved the other keys if, between the refusal (plus stormSlack) and the
// refused event's next call, no call of another key reached the agent
// although an event of another key was ready all along (ready, below) and
// its own first call arrived only after the refused event's next call.
// Intervals with a SIGKILL of serve in or just before them are not judged
// (the dead process's leases hide its messages for a while).
func (s *serveRun) verifyStorm(wl serveWorkload) {
	a := s.agent
	a.mu.Lock()
	defer a.mu.Unlock()
	s.mu.Lock()
	accepted, kills := s.acceptedAt, append([]time.Time(nil), s.killedAt...)
	s.mu.Unlock()
	storm := map[string]bool{}
	for _, k := range stormKeys {
		storm[k] = true
	}
	if len(a.w.refusals) == 0 {
		s.res.fail("retry-after storm: the agent refused nothing")
		return
	}
	killedIn := func(from, to time.Time) bool {
		for _, k := range kills {
			if !k.Before(from) && k.Before(to) {
				return true
			}
		}
		return false
	}
	// ready reports an event of another key that the gateway could have
	// called all through (from, to) and that was first called only after
	// to. It was accepted before from; its key's previous event was
	// answered 200 before from (an effect whose answer was lost is not
	// known to the gateway, which calls again after a backoff); no serve
	// process was SIGKILLed since the call that answered its predecessor
	// (or since its acceptance, for its key's first event), for a dead
	// process's lease or decision claim holds what it had: a copy
	// redelivered meanwhile waits out the claim (the decider's wait for a
	// decision in flight elsewhere, DecideTimeout/8, 15 s); and its
	// business key is its own (another event holding it makes it wait, as
	// it should).
	ready := func(from, to time.Time) string {
		for _, evs := range wl.byKey {
			var prev string
			for _, ev := range evs {
				if !ev.original {
					continue
				}
				if storm[ev.key] {
					break
				}
				acc, ok := accepted[ev.id]
				since := acc
				if prev != "" {
					ans, answered := a.w.answered[prev]
					ok = ok && answered && ans.at.Before(from)
					since = ans.arrived
				}
				ok = ok && acc.Before(from) && !killedIn(since, to) && len(wl.bkGroups[ev.bk]) <= 1
				if calls := a.w.arrivals[ev.id]; ok && len(calls) > 0 && calls[0].After(to) {
					return ev.id
				}
				prev = ev.id
			}
		}
		return ""
	}
	judged, starved := 0, 0
	var worst []string
	for _, r := range a.w.refusals {
		var next time.Time
		for _, t := range a.w.arrivals[r.id] {
			if t.After(r.at) {
				next = t
				break
			}
		}
		from := r.at.Add(stormSlack)
		if next.IsZero() || !next.After(from) {
			continue
		}
		killed := false
		for _, k := range kills {
			if k.After(r.at.Add(-3*time.Second)) && k.Before(next) {
				killed = true
			}
		}
		if killed {
			continue
		}
		judged++
		others := 0
		for _, c := range a.w.calls {
			if c.key != r.key && c.arrived.After(from) && c.arrived.Before(next) {
				others++
			}
		}
		if others > 0 {
			continue
		}
		if id := ready(r.at, next); id != "" {
			starved++
			worst = append(worst, fmt.Sprintf("%s refused at +%s, called again %s later, no call of another key meanwhile though %s was ready",
				r.id, r.at.Sub(a.w.refusals[0].at).Round(time.Millisecond), next.Sub(r.at).Round(time.Millisecond), id))
		}
	}
	s.h.progress("%s: %d refusals with Retry-After, %d judged, %d starved the other keys", s.name, len(a.w.refusals), judged, starved)
	if starved > 0 {
		sort.Strings(worst)
		s.res.fail("retry-after storm: %d of %d refusals paused every other key until the refused event came back: %s",
			starved, len(a.w.refusals), strings.Join(worst[:min(len(worst), 3)], "; "))
	}
}

// verifyNoDeadLetter: nothing but a poison event was dead-lettered (the
// agent would have taken every other one).
func (s *serveRun) verifyNoDeadLetter(ctx context.Context, st store.Store, wl serveWorkload) {
	poison := map[string]bool{}
	for _, evs := range wl.byKey {
		for _, ev := range evs {
			if isPoison(ev) {
				poison[ev.id] = true
			}
		}
	}
	rows, err := st.DB().QueryContext(ctx, `SELECT id, reason FROM seqbox_dlq WHERE source = 'chaos' ORDER BY seq`)
	if err != nil {
		s.res.fail("read the DLQ: %v", err)
		return
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id, reason string
		if err := rows.Scan(&id, &reason); err != nil {
			s.res.fail("%v", err)
			return
		}
		if poison[id] {
			continue
		}
		if n++; n <= 5 {
			s.res.fail("%s: event %s was dead-lettered though the agent would have taken it: %s (%s)", s.name, id, reason, s.agent.failures(id))
		}
	}
	if n > 5 {
		s.res.fail("%s: %d events dead-lettered in all that the agent would have taken", s.name, n)
	}
}

// verifyDropped: each dropped event was dropped, never reached the
// agent's effects, and ended dead-lettered with its dead letter resolved
// as skipped (its key's later events, among the originals, are checked
// applied by verify).
func (s *serveRun) verifyDropped(ctx context.Context, st store.Store, wl serveWorkload, outcome map[string]string) {
	byID := map[string]int{}
	for _, e := range s.agent.history() {
		byID[e.ID]++
	}
	for _, id := range sortedIDs(wl.victims) {
		if s.notDroppable(id) {
			// Judged with the other events, and expected applied.
			s.res.ExpectedEffects++
			s.h.progress("%s: %s was dispatched from the parked table, not the queue: not dropped, judged as any event", s.name, id)
			continue
		}
		s.mu.Lock()
		n, dropped := s.droppedRows[id]
		s.mu.Unlock()
		if !dropped || n == 0 {
			s.res.fail("dropped-message: %s was not dropped (its call hung: %v, queue rows deleted: %d)", id, dropped, n)
			continue
		}
		if byID[id] != 0 || outcome[id] != "dead_lettered" {
			s.res.fail("dropped-message: %s ended %q with %d effects at the agent (want dead_lettered, none)", id, outcome[id], byID[id])
		}
		var resolution string
		err := st.DB().QueryRowContext(ctx, `SELECT resolution FROM seqbox_dlq WHERE source = 'chaos' AND id = $1 ORDER BY seq DESC LIMIT 1`, id).Scan(&resolution)
		if err != nil || !strings.HasPrefix(resolution, "skipped") {
			s.res.fail("dropped-message: %s's dead letter: resolution %q, %v (want skipped)", id, resolution, err)
		}
	}
}

func sortedIDs(m map[string]serveEvent) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// heldKeys says which keys have parked events waiting, for a stalled run.
func (s *serveRun) heldKeys(ctx context.Context) string {
	st, err := dbopen.StoreAccess(ctx, s.db, store.ReadOnly)
	if err != nil {
		return err.Error()
	}
	defer st.Close()
	rows, err := st.DB().QueryContext(ctx, `SELECT partitionkey, reason, COUNT(*) FROM seqbox_parked
		WHERE reason IN ('held', 'blocked') GROUP BY partitionkey, reason ORDER BY partitionkey`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var key, reason string
		var n int
		if rows.Scan(&key, &reason, &n) == nil {
			out = append(out, fmt.Sprintf("%s: %d %s", key, n, reason))
		}
	}
	return strings.Join(out, ", ")
}
