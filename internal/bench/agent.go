package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/serve"
	"github.com/seqbox/seqbox/internal/sqlitedb"
	"github.com/seqbox/seqbox/seqboxtype"
)

// AgentOptions configure `seqbox bench agent`: the agent path measured,
// the gateway's (serve) or the library's (Config.Decide with an
// effects.Ledger), against an agent in this process that answers after
// Latency.
type AgentOptions struct {
	// DB is a SQLite path or a postgres:// URL.
	DB string
	// Target is "serve" (seqbox serve's pipeline, over HTTP on loopback)
	// or "library" (Config.Decide calling the agent through effects.Ledger).
	Target string
	// Keys get Versions events each, versions 1..Versions.
	Keys, Versions int
	// Latency is how long the agent takes to answer.
	Latency time.Duration
	// Concurrency is the agent calls in flight at most
	// (seqbox serve --agent-concurrency, Config.DecideConcurrency).
	Concurrency int
	// PostBatch is the events of one POST to seqbox serve (target
	// serve): 1 (or 0) posts each event alone as a structured CloudEvent,
	// more posts them in CloudEvents batch mode, that many a request
	// (the library's target publishes a round's events in one batch).
	PostBatch int
	// Chain is the events of the one-key chain measured with an instant
	// agent (chain_p50_ms, chain_p99_ms).
	Chain int
	// CoreMessages is the messages of the core's run (core_per_s).
	CoreMessages int
	// Statements, when positive, records the statements SQLite's writer
	// pools ran in the core's run and in the Keys x Versions run
	// (AgentResult.CoreStatements, AgentStatements): where the one
	// writer's time goes (`--statements N` prints the N longest).
	Statements int
	// Work measures what the core's run and the Keys x Versions run cost
	// the database (AgentResult.CoreWork, AgentWork; `--work`).
	Work bool
	// Pages, on SQLite, counts the WAL frames the core's run and the
	// Keys x Versions run appended, by table and index
	// (AgentResult.CorePages, Pages; `--pages N` prints the N trees that
	// took most of each).
	Pages int
}

// AgentResult is what one `seqbox bench agent` run measured.
type AgentResult struct {
	Events               int
	Elapsed              time.Duration
	CorePerS             float64
	ChainP50, ChainP99   time.Duration
	BusyErrors           int64
	AttemptsOnContention int64
	// Checked says what the agent saw was in order and once per event.
	Checked string
	// Timeline is where the Keys x Versions run's time went.
	Timeline AgentTimeline
	// CoreStatements and AgentStatements are what the statement
	// recordings saw (AgentOptions.Statements), the longest first.
	CoreStatements, AgentStatements []sqlitedb.StatementTime
	// CoreWork and AgentWork are what the core's run and the Keys x
	// Versions run cost the database (AgentOptions.Work).
	CoreWork, AgentWork Work
	// CorePages and Pages are where the core's run's and the Keys x
	// Versions run's writes went (AgentOptions.Pages).
	CorePages, Pages Pages
}

// AgentTimeline is where the Keys x Versions run's time went beyond the
// agent's latency, from the times the agent answered each event: how
// late each key's first answer came after the start (the publish and the
// first pass included), each later step's time from one answer of a key
// to its next (Steps[v-1]: from version v to v+1), and the tail from the
// last answer to the last event applied. With every key in step, the
// run's time is about First's max, the steps' maxima and the tail, plus
// Versions x Latency.
type AgentTimeline struct {
	First Latency
	Steps []Latency
	Tail  time.Duration
}

// Line renders the timeline as `seqbox bench agent --timeline` prints it.
func (t AgentTimeline) Line() string {
	p50, worst := make([]string, len(t.Steps)), make([]string, len(t.Steps))
	for i, s := range t.Steps {
		p50[i], worst[i] = fmt.Sprintf("%.1f", msOf(s.P50)), fmt.Sprintf("%.1f", msOf(s.Max))
	}
	list := func(xs []string) string {
		if len(xs) == 0 {
			return "-" // one version: no step
		}
		return strings.Join(xs, ",")
	}
	return fmt.Sprintf("agent timeline: first_p50_ms=%.1f first_max_ms=%.1f steps_p50_ms=%s steps_max_ms=%s tail_ms=%.1f",
		msOf(t.First.P50), msOf(t.First.Max), list(p50), list(worst), msOf(t.Tail))
}

// EventsPerS is the agent path's rate.
func (r AgentResult) EventsPerS() float64 { return float64(r.Events) / r.Elapsed.Seconds() }

// Ideal is min(concurrency, keys)/latency: what an agent of that latency
// could take at that concurrency (0 for an instant agent).
func (o AgentOptions) Ideal() float64 {
	if o.Latency <= 0 {
		return 0
	}
	return float64(min(o.Concurrency, o.Keys)) / o.Latency.Seconds()
}

// Line renders the result as `seqbox bench agent` prints it.
func (r AgentResult) Line(o AgentOptions, store string) string {
	ideal, eff := "-", "-"
	if i := o.Ideal(); i > 0 {
		ideal, eff = fmt.Sprintf("%.0f", i), fmt.Sprintf("%.2f", r.EventsPerS()/i)
	}
	// The events of a POST: the library's target posts nothing.
	post := "-"
	if o.Target == "serve" {
		post = strconv.Itoa(max(o.PostBatch, 1))
	}
	// DESIGN.md §7's fields in its order, then this line's own.
	return fmt.Sprintf("agent: store=%s target=%s keys=%d latency_ms=%d concurrency=%d events_per_s=%.0f ideal_per_s=%s "+
		"efficiency=%s core_per_s=%.0f ratio_vs_core=%.3f chain_p50_ms=%.1f chain_p99_ms=%.1f busy_errors=%d attempts_on_contention=%d "+
		"check=%s versions=%d post_batch=%s",
		store, o.Target, o.Keys, o.Latency.Milliseconds(), o.Concurrency, r.EventsPerS(), ideal, eff,
		r.CorePerS, r.EventsPerS()/r.CorePerS, msOf(r.ChainP50), msOf(r.ChainP99), r.BusyErrors, r.AttemptsOnContention,
		r.Checked, o.Versions, post)
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Agent runs the agent path on one database: the core's rate with a
// per-message Handler, then Keys x Versions events through the target to
// an agent answering after Latency, then a chain of Chain events on one
// key with an instant agent. It fails when the agent saw an event twice
// or a key's events out of order.
func Agent(ctx context.Context, o AgentOptions) (AgentResult, error) {
	var res AgentResult
	if o.Target != "serve" && o.Target != "library" {
		return res, fmt.Errorf("bench agent: --target %q: want serve or library", o.Target)
	}
	// Held before the core's run and the target open their pools, so
	// that theirs keep every frame in the WAL.
	pages, err := holdPages(o.DB, o.Pages > 0)
	if err != nil {
		return res, err
	}
	defer pages.end()
	core, coreStatements, coreWork, corePages, err := corePerS(ctx, o, pages)
	if err != nil {
		return res, fmt.Errorf("core: %w", err)
	}
	res.CorePerS, res.CoreStatements, res.CoreWork, res.CorePages = core, coreStatements, coreWork, corePages
	run := newRun()
	watch := &contention{}
	a := newBenchAgent(o.Latency)
	defer a.close()
	tgt, err := startTarget(ctx, o, run, a.url(), watch)
	if err != nil {
		return res, err
	}
	defer tgt.stop()
	if err := pages.begin(); err != nil {
		return res, err
	}

	// Keys x Versions: each round posts one version of every key, so a
	// key's versions are accepted in order.
	work, err := startWork(ctx, o.DB, o.Work)
	if err != nil {
		return res, err
	}
	defer work.abandon()
	stopRecording := recordIf(o)
	start := time.Now()
	for v := 1; v <= o.Versions; v++ {
		bodies := make([][]byte, o.Keys)
		for k := range bodies {
			bodies[k] = agentBody(run, "e", k, v)
		}
		if err := tgt.send(ctx, bodies); err != nil {
			return res, err
		}
	}
	if err := a.waitFor(ctx, o.Keys*o.Versions, watch); err != nil {
		return res, err
	}
	if err := tgt.waitApplied(ctx, o.Keys*o.Versions); err != nil {
		stopRecording()
		return res, err
	}
	res.Events, res.Elapsed = o.Keys*o.Versions, time.Since(start)
	res.AgentStatements = stopRecording()
	if res.AgentWork, err = work.stop(ctx, res.Events); err != nil {
		return res, err
	}
	if res.Pages, err = pages.count(ctx, res.Events); err != nil {
		return res, err
	}
	res.Timeline = a.timeline(run, o, start, res.Elapsed)

	// The chain: one key, an instant agent; each step is the time from
	// one event's call to the next one's.
	a.latency.Store(0)
	chainStart := a.calls.Load()
	bodies := make([][]byte, o.Chain)
	for v := range bodies {
		bodies[v] = agentBody(run, "c", -1, v+1)
	}
	posted := time.Now()
	for _, b := range bodies {
		if err := tgt.send(ctx, [][]byte{b}); err != nil {
			return res, err
		}
	}
	if err := a.waitFor(ctx, int(chainStart)+o.Chain, watch); err != nil {
		return res, err
	}
	steps := a.steps(run+"-c-1-", posted)
	chain := LatencyOf(steps)
	res.ChainP50, res.ChainP99 = chain.P50, chain.P99
	res.BusyErrors, res.AttemptsOnContention = watch.busy.Load(), watch.attempts.Load()
	if err := a.check(); err != nil {
		return res, err
	}
	res.Checked = fmt.Sprintf("ok(%d_events_once_in_order)", a.calls.Load())
	return res, nil
}

// agentBody is version v of key k of a run (k < 0: the chain's key).
func agentBody(run, prefix string, k, v int) []byte {
	key := fmt.Sprintf("%s-k%d", run, k)
	if k < 0 {
		key = run + "-chain"
	}
	return fmt.Appendf(nil, `{"id":"%s-%s%d-%d","specversion":"1.0","source":"bench","type":"bench.agent","partitionkey":%q,"objectversion":%d,"data":{"k":%d,"v":%d}}`,
		run, prefix, k, v, key, v, k, v)
}

// corePerS measures the core pipeline (embedded queue, per-message
// Handler) on the same database: CoreMessages over 100 keys.
func corePerS(ctx context.Context, o AgentOptions, pages *pageMeter) (perS float64, statements []sqlitedb.StatementTime, work Work, written Pages, err error) {
	run := newRun()
	e, err := open(ctx, o.DB, "bench-core-"+run)
	if err != nil {
		return 0, nil, Work{}, Pages{}, err
	}
	defer e.close()
	if err := publish(ctx, e.q, Bodies("bench", run+"-core", run, o.CoreMessages, 100)); err != nil {
		return 0, nil, Work{}, Pages{}, err
	}
	meter, err := startWork(ctx, o.DB, o.Work)
	if err != nil {
		return 0, nil, Work{}, Pages{}, err
	}
	defer meter.abandon()
	if err := pages.begin(); err != nil {
		return 0, nil, Work{}, Pages{}, err
	}
	stopRecording := recordIf(o)
	l, err := startLive(ctx, e, 4, 64)
	if err != nil {
		stopRecording()
		return 0, nil, Work{}, Pages{}, err
	}
	waitErr := l.waitApplied(ctx, int64(o.CoreMessages))
	elapsed := time.Since(l.start)
	statements = stopRecording()
	if err := errors.Join(waitErr, l.stop()); err != nil {
		return 0, nil, Work{}, Pages{}, err
	}
	if written, err = pages.count(ctx, o.CoreMessages); err != nil {
		return 0, nil, Work{}, Pages{}, err
	}
	work, err = meter.stop(ctx, o.CoreMessages)
	return float64(o.CoreMessages) / elapsed.Seconds(), statements, work, written, err
}

// recordIf starts recording SQLite's statements when o.Statements asks for
// it; its stop returns what the recording saw (nil without one).
func recordIf(o AgentOptions) func() []sqlitedb.StatementTime {
	if o.Statements > 0 {
		if stop, ok := sqlitedb.RecordStatements(); ok {
			return stop
		}
	}
	return func() []sqlitedb.StatementTime { return nil }
}

// StatementLines renders a recording of a run of units messages or
// events as `seqbox bench agent --statements top` prints it: a summary
// line, then the top statements longest in all first, each with its
// count, its time in all and a run's average.
func StatementLines(run string, units int, ss []sqlitedb.StatementTime, top int) []string {
	var n, commits int64
	var total, commit time.Duration
	for _, s := range ss {
		n, total = n+s.Count, total+s.Total
		if s.Query == "COMMIT" {
			commits, commit = s.Count, s.Total
		}
	}
	out := []string{fmt.Sprintf("agent statements: run=%s units=%d statements=%d total_ms=%.1f per_unit_ms=%.3f commits=%d commit_ms=%.1f",
		run, units, n, msOf(total), msOf(total)/float64(max(units, 1)), commits, msOf(commit))}
	for _, s := range ss[:min(top, len(ss))] {
		q := s.Query
		if len(q) > 120 {
			q = q[:120] + "…"
		}
		out = append(out, fmt.Sprintf("  count=%d prepares=%d total_ms=%.1f avg_us=%.1f %s", s.Count, s.Prepares, msOf(s.Total),
			float64(s.Total.Microseconds())/float64(max(s.Count, 1)), q))
	}
	return out
}

// contention counts what a busy or locked database of seqbox's own did:
// log lines naming it, and attempts spent on it.
type contention struct {
	busy, attempts atomic.Int64
}

// Handle implements slog.Handler: it counts, and drops the record.
func (c *contention) Handle(_ context.Context, r slog.Record) error {
	text := r.Message
	r.Attrs(func(a slog.Attr) bool {
		text += " " + a.Value.String()
		return true
	})
	if isBusyText(text) {
		c.busy.Add(1)
		if strings.Contains(text, "attempt") || strings.Contains(r.Message, "will be retried") {
			c.attempts.Add(1)
		}
	}
	return nil
}

// Enabled implements slog.Handler.
func (c *contention) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs implements slog.Handler.
func (c *contention) WithAttrs([]slog.Attr) slog.Handler { return c }

// WithGroup implements slog.Handler.
func (c *contention) WithGroup(string) slog.Handler { return c }

func isBusyText(s string) bool {
	return strings.Contains(s, "SQLITE_BUSY") || strings.Contains(s, "SQLITE_LOCKED") || strings.Contains(s, "database is locked") ||
		strings.Contains(s, "deadlock detected") || strings.Contains(s, "could not serialize")
}

// benchAgent is the agent: it answers each call after latency and records
// what it was sent.
type benchAgent struct {
	srv     *httptest.Server
	latency atomic.Int64
	calls   atomic.Int64
	mu      sync.Mutex
	// byKey is each key's versions in the order received; keys the
	// Idempotency-Keys seen; at each event id's first call.
	byKey map[string][]int64
	keys  map[string]int
	at    map[string]time.Time
	order []string
	got   chan struct{}
}

func newBenchAgent(latency time.Duration) *benchAgent {
	a := &benchAgent{byKey: map[string][]int64{}, keys: map[string]int{}, at: map[string]time.Time{}, got: make(chan struct{}, 1)}
	a.latency.Store(int64(latency))
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	return a
}

func (a *benchAgent) url() string { return a.srv.URL }

func (a *benchAgent) close() { a.srv.Close() }

func (a *benchAgent) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusNoContent) // the gateway's probe
		return
	}
	body, _ := io.ReadAll(r.Body)
	if d := time.Duration(a.latency.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	id := idOf(body)
	key := r.Header.Get(serve.HeaderPartitionKey)
	v, _ := strconv.ParseInt(r.Header.Get(serve.HeaderObjectVersion), 10, 64)
	a.mu.Lock()
	a.keys[r.Header.Get(serve.HeaderIdempotencyKey)]++
	if _, seen := a.at[id]; !seen {
		a.at[id] = time.Now()
		a.order = append(a.order, id)
		a.byKey[key] = append(a.byKey[key], v)
	}
	a.mu.Unlock()
	a.calls.Add(1)
	select {
	case a.got <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

// waitFor waits until the agent was called n times in all. It fails when
// nothing arrives for stallAfter.
func (a *benchAgent) waitFor(ctx context.Context, n int, watch *contention) error {
	for a.calls.Load() < int64(n) {
		select {
		case <-a.got:
		case <-time.After(stallAfter):
			return fmt.Errorf("the agent got %d of %d calls and then nothing for %s (busy errors: %d)", a.calls.Load(), n, stallAfter, watch.busy.Load())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// steps are the times between the calls of the events whose ids start
// with prefix: the first from posted, each next from the call before it.
func (a *benchAgent) steps(prefix string, posted time.Time) []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []time.Duration
	prev := posted
	for _, id := range a.order {
		if !strings.HasPrefix(id, prefix) {
			continue
		}
		out = append(out, a.at[id].Sub(prev))
		prev = a.at[id]
	}
	return out
}

// timeline is where the Keys x Versions run (started at start, ended
// elapsed later) spent its time beyond the agent's latency.
func (a *benchAgent) timeline(run string, o AgentOptions, start time.Time, elapsed time.Duration) AgentTimeline {
	a.mu.Lock()
	defer a.mu.Unlock()
	var first []time.Duration
	steps := make([][]time.Duration, o.Versions-1)
	var last time.Duration
	for k := range o.Keys {
		var prev time.Time
		for v := 1; v <= o.Versions; v++ {
			at := a.at[idOf(agentBody(run, "e", k, v))]
			last = max(last, at.Sub(start))
			if v == 1 {
				first = append(first, at.Sub(start)-o.Latency)
			} else {
				steps[v-2] = append(steps[v-2], at.Sub(prev)-o.Latency)
			}
			prev = at
		}
	}
	t := AgentTimeline{First: LatencyOf(first), Tail: elapsed - last}
	for _, s := range steps {
		t.Steps = append(t.Steps, LatencyOf(s))
	}
	return t
}

// check fails when an Idempotency-Key came twice or a key's versions came
// out of order.
func (a *benchAgent) check() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, n := range a.keys {
		if n > 1 {
			return fmt.Errorf("the agent got Idempotency-Key %s %d times", k, n)
		}
	}
	for key, vs := range a.byKey {
		if !slices.IsSorted(vs) || len(slices.Compact(slices.Clone(vs))) != len(vs) {
			return fmt.Errorf("the agent got key %s's versions out of order: %v", key, vs)
		}
	}
	return nil
}

// target is what carries events to the agent: the gateway or a library
// consumer.
type target struct {
	send        func(ctx context.Context, bodies [][]byte) error
	waitApplied func(ctx context.Context, n int) error
	stop        func()
}

func startTarget(ctx context.Context, o AgentOptions, run, agentURL string, watch *contention) (*target, error) {
	if o.Target == "serve" {
		return startServe(ctx, o, agentURL, watch)
	}
	return startLibrary(ctx, o, run, agentURL, watch)
}

// startServe runs seqbox serve in this process on a loopback port, with
// the agent at agentURL.
func startServe(ctx context.Context, o AgentOptions, agentURL string, watch *contention) (*target, error) {
	name := "bench-agent-" + newRun()
	srv, err := serve.New(ctx, serve.Options{DB: o.DB, AgentURL: agentURL, AgentConcurrency: o.Concurrency,
		Addr: "127.0.0.1:0", PurgeEvery: -1, Logger: slog.New(watch), Consumer: name, Queue: name})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	return &target{
		send: func(ctx context.Context, bodies [][]byte) error {
			return postAll(ctx, client, base, postBodies(bodies, o.PostBatch))
		},
		waitApplied: func(ctx context.Context, n int) error {
			// From the server's memory, not the database: a count every
			// poll would take the store's time from what is measured.
			return waitCount(ctx, n, func() (int64, error) { return srv.Committed(seqboxtype.Applied), nil })
		},
		stop: func() { cancel(); <-done },
	}, nil
}

// postBody is one POST to /v1/events: its body and Content-Type.
type postBody struct {
	body        []byte
	contentType string
}

// postBodies makes the POSTs of events: each event alone as a structured
// CloudEvent when batch is at most 1, else JSON arrays of up to batch
// events in CloudEvents batch mode, in the events' order.
func postBodies(events [][]byte, batch int) []postBody {
	if batch <= 1 {
		posts := make([]postBody, len(events))
		for i, e := range events {
			posts[i] = postBody{e, "application/cloudevents+json"}
		}
		return posts
	}
	var posts []postBody
	for chunk := range slices.Chunk(events, batch) {
		b := append([]byte{'['}, bytes.Join(chunk, []byte{','})...)
		posts = append(posts, postBody{append(b, ']'), "application/cloudevents-batch+json"})
	}
	return posts
}

// postAll sends each POST, 32 at a time; every answer must be 202.
func postAll(ctx context.Context, client *http.Client, base string, bodies []postBody) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(bodies))
	sem := make(chan struct{}, 32)
	for _, b := range bodies {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/events", bytes.NewReader(b.body))
			if err != nil {
				errs <- err
				return
			}
			req.Header.Set("Content-Type", b.contentType)
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				errs <- fmt.Errorf("POST /v1/events answered %s", resp.Status)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// waitCount waits until count reaches n, failing when it does not move
// for stallAfter.
func waitCount(ctx context.Context, n int, count func() (int64, error)) error {
	last, lastAt := int64(-1), time.Now()
	for {
		got, err := count()
		if err != nil {
			return err
		}
		if got >= int64(n) {
			return nil
		}
		if got != last {
			last, lastAt = got, time.Now()
		} else if time.Since(lastAt) > stallAfter {
			return fmt.Errorf("stalled at %d of %d applied", got, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// startLibrary runs a consumer with Config.Decide calling the agent
// through effects.Ledger, and the record handler, on the embedded queue.
func startLibrary(ctx context.Context, o AgentOptions, run, agentURL string, watch *contention) (*target, error) {
	e, err := open(ctx, o.DB, "bench-agent-"+run)
	if err != nil {
		return nil, err
	}
	log := slog.New(watch)
	ledger, err := effects.New(e.st, effects.Config{Logger: log})
	if err != nil {
		e.close()
		return nil, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: max(o.Concurrency, 2)}, Timeout: 30 * time.Second}
	decide := func(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
		ref, err := ledger.Do(ctx, "agent", effects.HTTP(client, func(ctx context.Context) (*http.Request, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, agentURL, bytes.NewReader(ev.Raw))
			if err == nil {
				req.Header.Set(serve.HeaderPartitionKey, ev.PartitionKey)
				if v, ok := ev.Version(); ok {
					req.Header.Set(serve.HeaderObjectVersion, strconv.FormatInt(v, 10))
				}
			}
			return req, err
		}, func(*http.Response) (string, error) { return "ok", nil }))
		return []byte(ref), err
	}
	var applied atomic.Int64
	name := "bench-agent-" + run
	c, err := seqbox.NewConsumer(seqbox.Config{Name: name, Store: e.st, Transport: e.q, Decide: decide,
		DecideConcurrency: o.Concurrency, Logger: log,
		Handler: func(context.Context, seqbox.Tx, seqboxtype.Event) error { return nil },
		Observer: func(r seqboxtype.Result) {
			if r.Outcome == seqboxtype.Applied {
				applied.Add(1)
			}
		}})
	if err != nil {
		e.close()
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	return &target{
		send: func(ctx context.Context, bodies [][]byte) error { return publish(ctx, e.q, bodies) },
		waitApplied: func(ctx context.Context, n int) error {
			return waitCount(ctx, n, func() (int64, error) { return applied.Load(), nil })
		},
		stop: func() { cancel(); <-done; e.close() },
	}, nil
}
