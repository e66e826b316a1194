package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/store"
)

// ServeScenarios are the scenarios of the serve target (docs/design.md §10.5): random
// kills, kills at each fault point of the agent path, and the workloads
// of serve_workloads.go (a Retry-After storm, a lying HEAD, a dropped
// message) with random kills. Every scenario also posts racing copies and
// cross-key business-key pairs.
func ServeScenarios() []string {
	return append([]string{"random", "fault:" + string(fault.AfterDecisionClaim), "fault:" + string(fault.AfterLedgerPending),
		"fault:" + string(fault.AfterAgentAnswer), "fault:" + string(fault.DuringRedrive)}, workloadScenarios...)
}

// serveToken is the admin token of the serve processes.
const serveToken = "chaos-admin-token-0123456789abcdef"

// RunServe runs the harness over the gateway: two competing `seqbox serve`
// processes on one database, a faulty agent, producers that re-send,
// collide and reuse business keys, and SIGKILLs of serve at random or at a
// fault point of the agent path. One key in three carries no objectversion.
// The oracle reads the agent's side, and the agent's receipt log is checked
// as a history (CheckHistory).
func RunServe(ctx context.Context, opt Options) ([]Result, error) {
	if opt.Timeout <= 0 {
		opt.Timeout = 15 * time.Minute
	}
	if opt.ProcLog == nil {
		opt.ProcLog = discard{}
	}
	if opt.Progress == nil {
		opt.Progress = discard{}
	}
	if err := opt.Check(); err != nil {
		return nil, err
	}
	names := opt.Scenarios
	if len(names) == 0 {
		names = ServeScenarios()
	}
	known := map[string]bool{}
	for _, s := range ServeScenarios() {
		known[s] = true
	}
	h := &harness{opt: opt, r: rand.New(rand.NewPCG(opt.Seed, 99))}
	var out []Result
	h.total = len(names)
	for i, name := range names {
		h.index, h.started = i+1, time.Now()
		if !known[name] {
			return out, fmt.Errorf("chaos: unknown scenario %q for --target serve (have %s)", name, strings.Join(ServeScenarios(), ", "))
		}
		sctx, cancel := context.WithTimeout(ctx, opt.Timeout)
		res := h.serveScenario(sctx, name)
		cancel()
		out = append(out, res)
		if opt.OnResult != nil {
			opt.OnResult(res)
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// serveEvent is one event the producers send.
type serveEvent struct {
	id, key, bk string
	body        []byte
	// original: the first send of a fresh identity (not a re-send, a
	// collision or a business-key reuse).
	original bool
}

// serveWorkload is what the producers send, key by key, in order.
type serveWorkload struct {
	byKey [][]serveEvent
	// bkGroups: business key → the ids asking for its effect.
	bkGroups  map[string][]string
	originals []serveEvent
	// order: each unversioned partition key → its identities
	// ("source/id") in the order its producer posts them (a versioned
	// key's order is its versions').
	order map[string][]string
	// races: ids posted with several payloads at once; pairs: two ids
	// of one business key posted at once (serve_workloads.go).
	races []raceGroup
	pairs [][2]serveEvent
	// victims: the events the dropped-message scenario drops.
	victims map[string]serveEvent
}

// generateServe builds the serve workload: messages events over keys
// partition keys, key k's events posted in order by one producer.
func generateServe(seed uint64, messages, keys int) serveWorkload {
	r := rand.New(rand.NewPCG(seed, 3))
	wl := serveWorkload{byKey: make([][]serveEvent, keys), bkGroups: map[string][]string{}, order: map[string][]string{}}
	body := func(id, key string, v int64, bk, data string) []byte {
		m := map[string]any{"specversion": "1.0", "id": id, "source": "chaos", "type": "lead.updated",
			"partitionkey": key, "data": json.RawMessage(data)}
		if v > 0 {
			m["objectversion"] = v
		}
		if bk != "" {
			m["businesskey"] = bk
		}
		b, _ := json.Marshal(m)
		return b
	}
	reuses := 0
	for i := range messages {
		k := i % keys
		key := fmt.Sprintf("lead-%02d", k)
		v := int64(i/keys + 1)
		if k%3 == 2 {
			v = 0 // one key in three has no objectversion: ordered by arrival only
		}
		id := fmt.Sprintf("e%05d", i)
		bk, data := "", fmt.Sprintf(`{"n":%d}`, i)
		if r.IntN(100) < 30 {
			bk = "bk-" + id
			wl.bkGroups[bk] = append(wl.bkGroups[bk], id)
		}
		if r.IntN(100) < 2 {
			data = `{"poison":true}`
		}
		ev := serveEvent{id: id, key: key, bk: bk, body: body(id, key, v, bk, data), original: true}
		wl.byKey[k] = append(wl.byKey[k], ev)
		wl.originals = append(wl.originals, ev)
		if v == 0 {
			wl.order[key] = append(wl.order[key], "chaos/"+id)
		}
		switch n := r.IntN(100); {
		case n < 6: // a producer's retry: the same event again
			wl.byKey[k] = append(wl.byKey[k], serveEvent{id: id, key: key, body: ev.body})
		case n < 8: // the same identity with other content: a collision
			wl.byKey[k] = append(wl.byKey[k], serveEvent{id: id, key: key, body: body(id, key, v, bk, `{"collide":true}`)})
		case n < 11 && bk != "": // the same effect under a new id
			reuses++
			rid, rkey := fmt.Sprintf("reuse-%04d", reuses), fmt.Sprintf("reuse-%04d", reuses)
			wl.byKey[k] = append(wl.byKey[k], serveEvent{id: rid, key: rkey, bk: bk, body: body(rid, rkey, 0, bk, `{"reuse":true}`)})
			wl.bkGroups[bk] = append(wl.bkGroups[bk], rid)
			wl.order[rkey] = append(wl.order[rkey], "chaos/"+rid)
		}
	}
	wl.addRaces(seed, max(10, messages/20))
	return wl
}

// serveRun is the state of one serve scenario.
type serveRun struct {
	h      *harness
	name   string
	db     string
	agent  *faultyAgent
	res    *Result
	mu     sync.Mutex
	procs  [2]*proc
	addrs  [2]string
	kills  int
	client *http.Client
	// victims: the events to drop (dropped-message); restarts is held
	// by killLoop's restarts and by a drop (no serve restarts while one
	// is dropped); droppedRows: the queue rows deleted for each. A
	// victim whose call hung while no queue row held it was dispatched
	// from seqbox's own parked table (it waited behind a blocked or
	// retrying predecessor): no broker can drop it, and it is judged as
	// any other event (notDroppable).
	victims     map[string]serveEvent
	restarts    sync.Mutex
	droppedRows map[string]int
	// parkedVictims: victims found in the parked table when dropped
	// (notDroppable).
	parkedVictims map[string]bool
	// acceptedAt: when each event id was first accepted; killedAt: when
	// each SIGKILL was seen (the storm's oracle).
	acceptedAt map[string]time.Time
	killedAt   []time.Time
}

func (h *harness) serveScenario(ctx context.Context, name string) (res Result) {
	start := time.Now()
	res = Result{Scenario: name}
	defer func() { res.Elapsed = time.Since(start) }()
	db, cleanup, err := h.freshDB(name)
	if err != nil {
		res.fail("setup: %v", err)
		return res
	}
	defer cleanup()
	agent, err := startFaultyAgent(h.opt.Seed)
	if err != nil {
		res.fail("agent: %v", err)
		return res
	}
	defer agent.Close()
	wl := generateServe(h.opt.Seed, h.opt.Messages, h.opt.Keys)
	s := &serveRun{h: h, name: name, db: db, agent: agent, res: &res, droppedRows: map[string]int{}, parkedVictims: map[string]bool{}, acceptedAt: map[string]time.Time{},
		client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	switch name {
	case stormScenario:
		for _, k := range stormKeys {
			agent.w.stormLeft[k] = stormPerKey
		}
	case dropScenario:
		wl.pickVictims()
		s.victims = wl.victims
		for id := range wl.victims {
			agent.w.victims[id] = true
		}
	}
	res.ExpectedEffects = len(wl.originals) - len(wl.victims)
	defer s.client.Transport.(*http.Transport).CloseIdleConnections()
	for i := range s.procs {
		if err := s.startServe(ctx, i); err != nil {
			res.fail("%v", err)
			return res
		}
	}
	defer s.stopAll()
	if err := s.run(ctx, wl); err != nil {
		res.fail("%v", err)
	}
	s.stopAll()
	res.Kills = s.kills
	s.verify(ctx, wl)
	return res
}

// startServe starts serve process i. In a fault scenario, while kills
// remain, it is armed to kill itself at the fault point.
func (s *serveRun) startServe(ctx context.Context, i int) error {
	args := []string{"serve", "--db", s.db, "--addr", "127.0.0.1:0", "--agent-url", s.agent.url,
		"--admin-token", serveToken, "--agent-timeout", "2s", "--lease", "2s", "--max-attempts", "8",
		"--retry-backoff", "100ms", "--max-retry-backoff", "2s", "--request-wait", "20s", "--log-level", "info"}
	args = append(args, s.extraServeArgs()...)
	var env []string
	if f := strings.TrimPrefix(s.name, "fault:"); f != s.name && s.kills < s.h.opt.Kills {
		n := 1 + s.h.r.IntN(6)
		if f == string(fault.DuringRedrive) {
			n = 1 // redrives are few: the first one dies
		}
		env = []string{fault.Env + "=" + f + ":" + strconv.Itoa(n)}
	}
	p, err := startProc(s.h.opt.Self, s.h.opt.ProcLog, fmt.Sprintf("serve-%d", i), env, args...)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := p.output.String()
		if j := strings.Index(out, "listening on http://"); j >= 0 {
			rest := out[j+len("listening on http://"):]
			if k := strings.IndexAny(rest, "\" \n"); k > 0 {
				s.mu.Lock()
				s.procs[i], s.addrs[i] = p, rest[:k]
				s.mu.Unlock()
				return nil
			}
		}
		if p.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			p.kill()
			return fmt.Errorf("serve-%d did not start: %s", i, strings.TrimSpace(out))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *serveRun) stopAll() {
	s.mu.Lock()
	procs := s.procs
	s.mu.Unlock()
	for _, p := range procs {
		if p != nil && !p.exited() {
			_ = p.stop(20 * time.Second)
		}
	}
}

// post sends one event to a live serve until one answers it: 202 or 200
// (its identity is accepted), or 409 (a collision, refused).
func (s *serveRun) post(ctx context.Context, body []byte) error {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		s.mu.Lock()
		addr := s.addrs[(attempt+int(body[len(body)/2]))%len(s.addrs)]
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
		time.Sleep(50 * time.Millisecond) // that serve was killed: try the other
	}
	return ctx.Err()
}

// postBatch sends a run of one key's events as one CloudEvents batch to
// a live serve until one answers it. A batch is queued whole or not at
// all, so a retry after a kill finds the events of a batch that committed
// as duplicates; each event's status in the answer says whether its
// identity is accepted (queued, duplicate) or refused (collision).
func (s *serveRun) postBatch(ctx context.Context, run []serveEvent) error {
	bodies := make([][]byte, len(run))
	for i, ev := range run {
		bodies[i] = ev.body
	}
	batch := append(append([]byte{'['}, bytes.Join(bodies, []byte{','})...), ']')
	for attempt := 0; ctx.Err() == nil; attempt++ {
		s.mu.Lock()
		addr := s.addrs[(attempt+int(batch[len(batch)/2]))%len(s.addrs)]
		s.mu.Unlock()
		resp, err := s.client.Post("http://"+addr+"/v1/events", "application/cloudevents-batch+json", bytes.NewReader(batch))
		if err == nil {
			var out struct {
				Events []struct {
					Status string `json:"status"`
				} `json:"events"`
			}
			derr := json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusAccepted, http.StatusOK, http.StatusConflict:
				if derr != nil || len(out.Events) != len(run) {
					return fmt.Errorf("ingest answered %s for the batch %s with %d events' statuses (%v)", resp.Status, batch, len(out.Events), derr)
				}
				for i, e := range out.Events {
					switch e.Status {
					case "queued", "duplicate":
						s.accepted(run[i].body)
					case "collision":
					default:
						return fmt.Errorf("ingest answered %s for the batch %s: event %d is %q", resp.Status, batch, i, e.Status)
					}
				}
				return nil
			}
			if resp.StatusCode < 500 {
				return fmt.Errorf("ingest answered %s for the batch %s", resp.Status, batch)
			}
		}
		time.Sleep(50 * time.Millisecond) // that serve was killed: try the other
	}
	return ctx.Err()
}

// run produces the workload while killing serve, then redrives what the
// poison events dead-lettered and waits for quiescence.
func (s *serveRun) run(ctx context.Context, wl serveWorkload) error {
	pctx, stopChaos := context.WithCancel(ctx)
	defer stopChaos()
	var chaos sync.WaitGroup
	chaos.Go(func() { s.killLoop(pctx) })
	chaos.Go(func() {
		switch s.name {
		case lieScenario:
			select {
			case <-pctx.Done():
			case <-time.After(time.Duration(1000+s.h.r.IntN(1000)) * time.Millisecond):
				s.agent.lie(lieFor)
				s.h.progress("%s: the agent answers HEAD 200 and POST 503 for %s", s.name, lieFor)
			}
			return
		case stormScenario, dropScenario:
			return // no outage: the circuit would pause every key
		}
		// Two outages of the agent of 3 s each: a deploy's restart.
		for range 2 {
			select {
			case <-pctx.Done():
				return
			case <-time.After(time.Duration(1000+s.h.r.IntN(3000)) * time.Millisecond):
			}
			s.agent.outage(3 * time.Second)
			s.h.progress("%s: agent outage of 3s", s.name)
		}
	})
	if len(s.victims) > 0 {
		chaos.Go(func() { s.dropLoop(pctx) })
	}
	var prod sync.WaitGroup
	errs := make(chan error, len(wl.byKey)+1)
	prod.Go(func() {
		if err := s.postRaces(ctx, wl); err != nil {
			errs <- err
		}
	})
	for k, evs := range wl.byKey {
		// Every other key's producer posts runs of its events (one to
		// four) in CloudEvents batch mode: all of a run or none under
		// the same kills.
		batched := k%2 == 1
		prod.Go(func() {
			for len(evs) > 0 {
				n := 1
				if batched {
					n = min(len(evs), 1+int(evs[0].id[len(evs[0].id)-1])%4)
				}
				var err error
				if n == 1 {
					err = s.post(ctx, evs[0].body)
				} else {
					err = s.postBatch(ctx, evs[:n])
				}
				if err != nil {
					errs <- err
					return
				}
				evs = evs[n:]
			}
		})
	}
	prod.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	// The poison stays until the queue is consumed, so that the poison
	// events are dead-lettered (and their keys blocked) before the
	// redrive, however slowly the store goes.
	s.h.progress("%s: %d events accepted; waiting for the queue to empty", s.name, len(wl.originals))
	for {
		n, err := s.count(ctx, `SELECT COUNT(*) FROM seqbox_queue`)
		if err != nil {
			return err
		}
		// The kills are counted by the supervisor's goroutine: not
		// known here.
		s.h.report(s.name, "drain", n, -1)
		if n == 0 {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("timed out with %d messages queued", n)
		}
		time.Sleep(300 * time.Millisecond)
	}
	s.h.progress("%s: lifting the poison and redriving", s.name)
	s.agent.poison.Store(false)
	stall := time.Now()
	lastPending := -1
	for {
		if err := s.redriveAll(ctx); err != nil {
			s.h.progress("%s: redrive: %v", s.name, err)
		}
		n, err := s.pending(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if n != lastPending {
			lastPending, stall = n, time.Now()
		}
		if time.Since(stall) > 2*time.Minute {
			s.checkLocks()
			return fmt.Errorf("stalled with %d events not final (parked: %s)%s", n, s.heldKeys(ctx), s.stuckReport())
		}
		if ctx.Err() != nil {
			return fmt.Errorf("timed out with %d events not final", n)
		}
		time.Sleep(300 * time.Millisecond)
	}
	stopChaos()
	chaos.Wait()
	// Every live serve still holds its lock on a SQLite file.
	s.checkLocks()
	return nil
}

// killLoop SIGKILLs a serve at random (the random scenario; in the fault
// scenarios the processes kill themselves at the fault point), and
// restarts every dead one, armed again while kills remain.
func (s *serveRun) killLoop(ctx context.Context) {
	random := s.name == "random" || isWorkloadScenario(s.name)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(600+s.h.r.IntN(1200)) * time.Millisecond):
		}
		if random && s.kills < s.h.opt.Kills {
			s.mu.Lock()
			p := s.procs[s.h.r.IntN(len(s.procs))]
			s.mu.Unlock()
			if !p.exited() {
				p.kill()
			}
		}
		s.restarts.Lock()
		for j := range s.procs {
			s.mu.Lock()
			p := s.procs[j]
			s.mu.Unlock()
			if !p.exited() {
				continue
			}
			if p.killedBySIGKILL() {
				s.kills++
				s.mu.Lock()
				s.killedAt = append(s.killedAt, time.Now())
				s.mu.Unlock()
			} else {
				s.res.fail("serve-%d exited on its own: %v: %s", j, p.err, lastLines(p.output.String()))
			}
			if err := s.startServe(ctx, j); err != nil && ctx.Err() == nil {
				s.res.fail("restart: %v", err)
				s.restarts.Unlock()
				return
			}
		}
		s.restarts.Unlock()
	}
}

func lastLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], " | ")
}

// redriveAll redrives every open dead letter through the admin API.
func (s *serveRun) redriveAll(ctx context.Context) error {
	s.mu.Lock()
	addr := s.addrs[s.h.r.IntN(len(s.addrs))]
	s.mu.Unlock()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/admin/dlq", nil)
	req.Header.Set("Authorization", "Bearer "+serveToken)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	var body struct {
		DeadLetters []struct {
			Seq int64 `json:"seq"`
		} `json:"dead_letters"`
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if len(body.DeadLetters) > 0 {
		s.h.progress("%s: redriving %d dead letters", s.name, len(body.DeadLetters))
	}
	for _, d := range body.DeadLetters {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s/v1/admin/dlq/%d/redrive", addr, d.Seq), strings.NewReader(`{"reason":"chaos: the poison was lifted"}`))
		req.Header.Set("Authorization", "Bearer "+serveToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
	}
	return nil
}

// pending counts what is not final yet: queued messages, parked ones,
// open dead letters and identities left pending.
func (s *serveRun) pending(ctx context.Context) (int, error) {
	return s.count(ctx, pendingQuery)
}

// pendingQuery counts what is not final yet in a gateway's database.
const pendingQuery = `SELECT
		(SELECT COUNT(*) FROM seqbox_queue) +
		(SELECT COUNT(*) FROM seqbox_parked WHERE reason IN ('held', 'blocked')) +
		(SELECT COUNT(*) FROM seqbox_dlq WHERE state = 'open') +
		(SELECT COUNT(*) FROM seqbox_inbox WHERE outcome = '')`

// count runs a COUNT query on the scenario's database.
func (s *serveRun) count(ctx context.Context, query string) (int, error) {
	return dbCount(ctx, s.db, query)
}

// dbCount runs a COUNT query on the database db.
func dbCount(ctx context.Context, db, query string) (int, error) {
	st, err := dbopen.StoreAccess(ctx, db, store.ReadOnly)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	var n int
	err = st.DB().QueryRowContext(ctx, query).Scan(&n)
	return n, err
}

// verify checks the oracle: the agent's side (order, one key per event,
// no business-key or collision duplicate) and that every original event
// ended applied, or a semantic duplicate of one that was; then the agent's
// receipt log as a history (checkHistory).
func (s *serveRun) verify(ctx context.Context, wl serveWorkload) {
	byID := s.agent.check(s.res)
	st, err := dbopen.StoreAccess(ctx, s.db, store.ReadOnly)
	if err != nil {
		s.res.fail("open the database: %v", err)
		return
	}
	defer st.Close()
	rows, err := st.DB().QueryContext(ctx, `SELECT id, outcome FROM seqbox_inbox WHERE source = 'chaos'`)
	if err != nil {
		s.res.fail("read the inbox: %v", err)
		return
	}
	outcome := map[string]string{}
	for rows.Next() {
		var id, o string
		if err := rows.Scan(&id, &o); err != nil {
			s.res.fail("%v", err)
		}
		outcome[id] = o
	}
	rows.Close()
	for _, ev := range wl.originals {
		o := outcome[ev.id]
		if _, dropped := wl.victims[ev.id]; dropped && !s.notDroppable(ev.id) {
			continue // verifyDropped
		}
		switch {
		case o == "applied" && byID[ev.id] == 1:
		case o == "semantic_duplicate" && ev.bk != "" && byID[ev.id] == 0:
		default:
			s.res.Lost++
			s.res.fail("event %s (key %s) ended %q with %d effects at the agent", ev.id, ev.key, o, byID[ev.id])
		}
	}
	for bk, ids := range wl.bkGroups {
		applied := 0
		for _, id := range ids {
			applied += byID[id]
		}
		if applied != 1 {
			s.res.fail("business key %s: %d effects at the agent for %v", bk, applied, ids)
		}
	}
	s.verifyWorkloads(ctx, st, wl, outcome)
	s.checkHistory(ctx, st, wl)
}
