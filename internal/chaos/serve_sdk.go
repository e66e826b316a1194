package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/store"
	"golang.org/x/sync/errgroup"
)

// SDKAgents are the SDK example agents `seqbox chaos --target serve
// --agent NAME` runs, each a command whose {listen}, {gateways} and
// {remote} are filled in (host:port to listen on; the gateways' base URLs,
// comma-separated; the remote side's base URL), paths relative to the
// checkout. Another SDK's agent is one more entry (or --agent-cmd).
var SDKAgents = map[string][]string{
	"python":     {"python3", "sdk/python/examples/refund_agent.py", "{listen}", "{gateways}", "{remote}"},
	"typescript": {"node", "sdk/typescript/dist/examples/refund-agent.js", "{listen}", "{gateways}", "{remote}"},
}

// SDKAgentBuilds are the commands that build an SDK's agent (run from
// the checkout), named when its file is missing: the harness runs what
// is there and builds nothing.
var SDKAgentBuilds = map[string]string{
	"typescript": "(cd sdk/typescript && npm ci && npm run build)",
}

// sdkRun is one scenario of an SDK's agent under chaos: two serve
// processes on one database in front of the agent, its own process,
// SIGKILLed at random and right after a tool call, and the serve
// processes SIGKILLed at random; the remote side counts the model's calls
// and the tools' effects.
type sdkRun struct {
	h       *harness
	name    string
	db      string
	cmd     []string
	remote  *sdkRemote
	res     *Result
	gwAddrs [2]string
	agentAt string
	mu      sync.Mutex
	serves  [2]*proc
	agent   *proc
	// killed: the agent incarnations that were SIGKILLed.
	killed map[int]bool
	kills  int
	client *http.Client
}

// RunServeAgent runs the serve target with an SDK's example agent
// (opt.AgentCmd, from SDKAgents or --agent-cmd) as scenario "agent:NAME".
func RunServeAgent(ctx context.Context, opt Options) ([]Result, error) {
	if err := opt.Check(); err != nil {
		return nil, err
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 15 * time.Minute
	}
	if opt.ProcLog == nil {
		opt.ProcLog = discard{}
	}
	if opt.Progress == nil {
		opt.Progress = discard{}
	}
	h := &harness{opt: opt, total: 1, index: 1, started: time.Now()}
	h.r = rand.New(rand.NewPCG(opt.Seed, 99))
	sctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	res := h.sdkScenario(sctx, "agent:"+opt.AgentName)
	if opt.OnResult != nil {
		opt.OnResult(res)
	}
	return []Result{res}, ctx.Err()
}

func (h *harness) sdkScenario(ctx context.Context, name string) (res Result) {
	start := time.Now()
	res = Result{Scenario: name}
	defer func() { res.Elapsed = time.Since(start) }()
	db, cleanup, err := h.freshDB(strings.ReplaceAll(name, ":", "_"))
	if err != nil {
		res.fail("setup: %v", err)
		return res
	}
	defer cleanup()
	remote, err := startSDKRemote()
	if err != nil {
		res.fail("remote: %v", err)
		return res
	}
	defer remote.Close()
	s := &sdkRun{h: h, name: name, db: db, cmd: h.opt.AgentCmd, remote: remote, res: &res, killed: map[int]bool{},
		client: &http.Client{Timeout: 15 * time.Second}}
	for i := range s.gwAddrs {
		if s.gwAddrs[i], err = freeAddr(); err != nil {
			res.fail("%v", err)
			return res
		}
	}
	if s.agentAt, err = freeAddr(); err != nil {
		res.fail("%v", err)
		return res
	}
	defer s.stopAll()
	if err := s.startAgent(ctx); err != nil {
		res.fail("%v", err)
		return res
	}
	for i := range s.serves {
		if err := s.startServe(ctx, i); err != nil {
			res.fail("%v", err)
			return res
		}
	}
	wl := generateSDK(h.opt.Messages, h.opt.Keys)
	if err := s.run(ctx, wl); err != nil {
		res.fail("%v", err)
	}
	s.stopAll()
	res.Kills = s.kills
	s.verify(ctx, wl)
	return res
}

// freeAddr is a loopback host:port nothing listens on now: the agent and
// the serve processes come back on the same address after a SIGKILL.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// agentArgs is the agent's command with its placeholders filled in and
// its relative paths found in the checkout (the working directory or one
// above it).
func (s *sdkRun) agentArgs() ([]string, error) {
	gateways := "http://" + s.gwAddrs[0] + ",http://" + s.gwAddrs[1]
	out := make([]string, len(s.cmd))
	for i, a := range s.cmd {
		a = strings.NewReplacer("{listen}", s.agentAt, "{gateways}", gateways, "{remote}", s.remote.url).Replace(a)
		if i > 0 && strings.Contains(a, "/") && !filepath.IsAbs(a) && !strings.Contains(a, "://") {
			found, err := inCheckout(a)
			if build, ok := SDKAgentBuilds[s.h.opt.AgentName]; ok && err != nil {
				return nil, fmt.Errorf("%w (build it first: %s)", err, build)
			}
			if err != nil {
				return nil, err
			}
			a = found
		}
		out[i] = a
	}
	return out, nil
}

// inCheckout finds rel in the working directory or a directory above it.
func inCheckout(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, rel)); err == nil {
			return filepath.Join(dir, rel), nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("the agent's %s is not in this directory or above: run from a checkout of seqbox, or give --agent-cmd", rel)
		}
		dir = up
	}
}

// startAgent starts the next incarnation of the agent and waits until it
// listens.
func (s *sdkRun) startAgent(ctx context.Context) error {
	args, err := s.agentArgs()
	if err != nil {
		return err
	}
	s.remote.mu.Lock()
	s.remote.incarnation++
	n := s.remote.incarnation
	s.remote.mu.Unlock()
	p, err := startCmd(s.h.opt.ProcLog, fmt.Sprintf("agent-%d", n), nil, args[0], args[1:]...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.agent = p
	s.mu.Unlock()
	return waitListening(ctx, p, "listening on http://")
}

// startServe starts serve process i on its address.
func (s *sdkRun) startServe(ctx context.Context, i int) error {
	p, err := startProc(s.h.opt.Self, s.h.opt.ProcLog, fmt.Sprintf("serve-%d", i), nil, "serve", "--db", s.db,
		"--addr", s.gwAddrs[i], "--agent-url", "http://"+s.agentAt+"/", "--admin-token", serveToken,
		"--agent-timeout", "3s", "--lease", "2s", "--max-attempts", "30", "--retry-backoff", "100ms",
		"--max-retry-backoff", "2s", "--log-level", "info")
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.serves[i] = p
	s.mu.Unlock()
	return waitListening(ctx, p, "listening on http://")
}

// waitListening waits for a process's line saying it listens.
func waitListening(ctx context.Context, p *proc, line string) error {
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.output.String(), line) {
		if p.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			p.kill()
			return fmt.Errorf("%s did not start: %s", p.name, lastLines(p.output.String()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func (s *sdkRun) stopAll() {
	s.mu.Lock()
	procs := []*proc{s.agent, s.serves[0], s.serves[1]}
	s.mu.Unlock()
	for _, p := range procs {
		if p != nil && !p.exited() {
			_ = p.stop(20 * time.Second)
		}
	}
}

// sdkWorkload is what the producers post: key k's events, versions 1, 2,
// ... in order; an event's data asks for a refund of amount (none when 0)
// and an email.
type sdkWorkload struct {
	byKey [][]sdkEvent
	all   []sdkEvent
}

type sdkEvent struct {
	id, key string
	amount  int
	body    []byte
}

func generateSDK(messages, keys int) sdkWorkload {
	wl := sdkWorkload{byKey: make([][]sdkEvent, keys)}
	for i := range messages {
		k := i % keys
		key := fmt.Sprintf("order-%d", k)
		v := len(wl.byKey[k]) + 1
		e := sdkEvent{id: fmt.Sprintf("e%d", i), key: key, amount: (i % 4) * 5}
		e.body, _ = json.Marshal(map[string]any{"specversion": "1.0", "id": e.id, "source": "chaos", "type": "refund.requested",
			"partitionkey": key, "objectversion": v, "data": map[string]any{"order": key, "amount": e.amount}})
		wl.byKey[k] = append(wl.byKey[k], e)
		wl.all = append(wl.all, e)
	}
	return wl
}

// run posts the workload (a producer per key, in order, to either serve)
// while the kill loop runs, then waits until every event is final.
func (s *sdkRun) run(ctx context.Context, wl sdkWorkload) error {
	kctx, stopKills := context.WithCancel(ctx)
	var kills sync.WaitGroup
	kills.Go(func() { s.killLoop(kctx) })
	defer func() { stopKills(); kills.Wait() }()
	// The producers pace their posts over the time the kill budget takes
	// to deal (a kill every 1.6 s on average), so that the kills land
	// while events are in flight.
	pace := time.Duration(s.h.opt.Kills) * 1600 * time.Millisecond / time.Duration(max(1, len(wl.all)/max(1, len(wl.byKey))))
	var g errgroup.Group
	g.SetLimit(64)
	for _, evs := range wl.byKey {
		g.Go(func() error {
			for _, e := range evs {
				if err := s.post(ctx, e.body); err != nil {
					return err
				}
				time.Sleep(pace)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	s.res.Deliveries = len(wl.all)
	stall, last := time.Now(), -1
	for {
		n, err := dbCount(ctx, s.db, pendingQuery)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n != last {
			last, stall = n, time.Now()
		}
		if time.Since(stall) > 2*time.Minute || ctx.Err() != nil {
			return fmt.Errorf("stalled with %d events not final", n)
		}
		s.h.report(s.name, "drain", n, s.kills)
		time.Sleep(300 * time.Millisecond)
	}
}

// post sends one event to either serve until one takes it.
func (s *sdkRun) post(ctx context.Context, body []byte) error {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		addr := s.gwAddrs[(attempt+len(body))%2]
		resp, err := s.client.Post("http://"+addr+"/v1/events", "application/cloudevents+json", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ctx.Err()
}

// killLoop deals the kill budget in turn: the agent at random, the agent
// right after its next tool call, a serve at random; and restarts each
// dead process on its address.
func (s *sdkRun) killLoop(ctx context.Context) {
	dealt := 0
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(800+s.h.r.IntN(1600)) * time.Millisecond):
		}
		if dealt < s.h.opt.Kills {
			s.mu.Lock()
			agent, serve := s.agent, s.serves[s.h.r.IntN(2)]
			s.mu.Unlock()
			switch dealt % 3 {
			case 0:
				agent.kill()
			case 1:
				s.remote.mu.Lock()
				s.remote.killAfterTool = agent.kill
				s.remote.mu.Unlock()
			case 2:
				serve.kill()
			}
			dealt++
		}
		s.restartDead(ctx)
	}
}

// restartDead restarts every process that died, counting its SIGKILL.
func (s *sdkRun) restartDead(ctx context.Context) {
	s.mu.Lock()
	agent, serves := s.agent, s.serves
	s.mu.Unlock()
	if agent.exited() {
		s.count(agent)
		s.remote.mu.Lock()
		s.killed[s.remote.incarnation] = true
		s.remote.mu.Unlock()
		if err := s.startAgent(ctx); err != nil && ctx.Err() == nil {
			s.res.fail("restart the agent: %v", err)
		}
	}
	for i, p := range serves {
		if p.exited() {
			s.count(p)
			if err := s.startServe(ctx, i); err != nil && ctx.Err() == nil {
				s.res.fail("restart serve-%d: %v", i, err)
			}
		}
	}
}

// count counts a dead process's SIGKILL; one that exited otherwise fails
// the scenario.
func (s *sdkRun) count(p *proc) {
	if p.killedBySIGKILL() {
		s.kills++
		return
	}
	s.res.fail("%s exited on its own: %v: %s", p.name, p.err, lastLines(p.output.String()))
}

// verify checks the oracle: every event applied; per (event, action) one
// remote effect, under one idempotency key, for every action its plan
// asked for; per (event, step) one model call, or more only from agent
// incarnations that were SIGKILLed before the call's answer was recorded
// (never two from one incarnation); per key, the events' emails (each
// event's last call) in version order.
func (s *sdkRun) verify(ctx context.Context, wl sdkWorkload) {
	st, err := dbopen.StoreAccess(ctx, s.db, store.ReadOnly)
	if err != nil {
		s.res.fail("open the database: %v", err)
		return
	}
	defer st.Close()
	outcome := map[string]string{}
	rows, err := st.DB().QueryContext(ctx, `SELECT id, outcome FROM seqbox_inbox WHERE source = 'chaos'`)
	if err != nil {
		s.res.fail("read the inbox: %v", err)
		return
	}
	for rows.Next() {
		var id, o string
		if err := rows.Scan(&id, &o); err != nil {
			s.res.fail("%v", err)
		}
		outcome[id] = o
	}
	rows.Close()
	var reconciled int
	if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM seqbox_effects WHERE reconciled_at IS NOT NULL AND action <> 'agent'`).Scan(&reconciled); err != nil {
		s.res.fail("count the reconciled calls: %v", err)
	}
	r := s.remote
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range wl.all {
		actions := []string{"email"}
		if e.amount > 0 {
			actions = append(actions, "refund")
			s.res.ExpectedEffects++
		}
		s.res.ExpectedEffects++
		if outcome[e.id] != "applied" {
			s.res.Lost++
			s.res.fail("event %s (key %s) ended %q", e.id, e.key, outcome[e.id])
		}
		for _, a := range actions {
			keys := r.byEvent[[2]string{e.id, a}]
			n := 0
			for k := range keys {
				n += r.applied[[2]string{a, k}]
			}
			s.res.ActualEffects += min(n, 1)
			switch {
			case n == 0:
				s.res.Lost++
				s.res.fail("event %s: no %s at the remote side", e.id, a)
			case n > 1 || len(keys) > 1:
				s.res.DuplicateEffects += n - 1
				s.res.fail("event %s: %s applied %d times under %d keys", e.id, a, n, len(keys))
			}
		}
		calls := r.model[[2]string{e.id, "plan"}]
		if len(calls) == 0 {
			s.res.fail("event %s: the model was never asked", e.id)
		}
		for i, inc := range calls[:max(len(calls)-1, 0)] {
			if !s.killed[inc] || calls[i+1] == inc {
				s.res.DuplicateEffects++
				s.res.fail("event %s: the model was asked %d times (incarnations %v) without a kill in between", e.id, len(calls), calls)
				break
			}
		}
	}
	for k, evs := range wl.byKey {
		got := r.emails[fmt.Sprintf("order-%d", k)]
		want := make([]string, 0, len(evs))
		for _, e := range evs {
			want = append(want, e.id)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			s.res.OrderViolations++
			s.res.fail("key order-%d: emails in the order %v, want %v", k, got, want)
		}
	}
	modelCalls := 0
	for _, c := range r.model {
		modelCalls += len(c)
	}
	s.res.Note = fmt.Sprintf("model_calls=%d steps=%d remote_effects=%d agent_kills=%d reconciled=%d", modelCalls, len(wl.all),
		s.res.ActualEffects, len(s.killed), reconciled)
}
