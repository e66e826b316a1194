package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/dbopen"
	"github.com/seqbox/seqbox/internal/own"
	"github.com/seqbox/seqbox/internal/replay"
	"github.com/seqbox/seqbox/internal/writeturn"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
	"github.com/seqbox/seqbox/transport/embedded"
)

// Server is one `seqbox serve`: the store, the embedded queue, the
// consumer over it, and the HTTP endpoints.
type Server struct {
	opt       Options
	store     store.Store
	queue     *embedded.Queue
	consumer  *seqbox.Consumer
	ledger    *effects.Ledger
	registry  *prometheus.Registry
	series    *outcomeSeries
	envelopes *envelopes
	retention *retentionStatus
	publisher *publisher
	handler   http.Handler
	started   time.Time

	consumerMetrics *seqbox.Metrics
	metrics         *gatewayMetrics
	// circuit pauses dispatch while the agent is down.
	circuit *circuit
	// disp calls the agent (its calls in flight are on the consumers
	// page).
	disp *dispatcher
	// tokens mints and checks the agent API's Seqbox-Effects-Token.
	tokens *tokens
	// inboxCounts caches the overview's counts of every identity and key.
	inboxCounts inboxCounts

	// agentOutcomes holds the outcomes of agent decisions between the handler and the Observer,
	// by store.Identity.
	agentOutcomes sync.Map
	// draining is set once shutdown began: /readyz answers 503.
	draining atomic.Bool
	// runErr is set when the consumer stopped on its own.
	runErr atomic.Pointer[error]
	// ingestFailed is the last ingest that could not queue its events
	// (a full disk, a database that refuses writes); a successful one
	// clears it. /readyz fails while it is recent.
	ingestFailed atomic.Pointer[ingestFailure]
}

// ingestFailure is an ingest that could not queue its events, and when.
type ingestFailure struct {
	err error
	at  time.Time
}

// ingestFailureHold is how long a failed ingest keeps /readyz failing
// without a successful one: long enough for a load balancer to take the
// gateway out, short enough that it comes back to try again once the
// disk has room.
const ingestFailureHold = 30 * time.Second

// New opens the database and the queue and builds the consumer. Call
// Serve to run it, or Close to release it unused.
func New(ctx context.Context, opt Options) (*Server, error) {
	opt = opt.withDefaults()
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	fillPolicyDefaults(&opt.Policy)
	// As its owner left it: a database seqbox made (serve's own, a
	// bench's) stays seqbox's, so that the CLI's creating commands still
	// take it; an application's is adopted as the library adopts it.
	st, err := dbopen.StoreOwned(ctx, opt.DB)
	if err != nil {
		return nil, fmt.Errorf("--db %s: %w", RedactURL(opt.DB), err)
	}
	s := &Server{opt: opt, store: st, started: time.Now(), envelopes: newEnvelopes(opt.Consumer),
		retention: &retentionStatus{}, inboxCounts: inboxCounts{now: time.Now}}
	fail := func(err error) (*Server, error) {
		s.Close()
		return nil, err
	}
	if s.queue, err = embedded.Open(ctx, opt.DB, embedded.Config{Name: opt.Queue, Lease: opt.Lease}); err != nil {
		return fail(fmt.Errorf("open the embedded queue: %w", err))
	}
	now := time.Now
	if opt.Policy.Now != nil {
		now = opt.Policy.Now
	}
	s.series = newOutcomeSeries(now)
	disp := &dispatcher{url: opt.AgentURL, consumer: opt.Consumer, now: now, client: newAgentClient(opt.AgentTimeout, opt.AgentConcurrency), hook: opt.Hook, log: opt.Logger}
	s.circuit = newCircuit(now, disp.probe, s.circuitChanged)
	disp.circuit = s.circuit
	s.disp = disp
	// The dispatcher logs each failed agent call itself, with the event's
	// key and version: the ledger's own line would repeat it.
	quiet := slog.New(slog.DiscardHandler)
	if s.ledger, err = effects.New(st, effects.Config{Timeout: opt.AgentTimeout, Reconcile: disp.reconcile, Now: now, Logger: quiet}); err != nil {
		return fail(err)
	}
	s.registry = s.newRegistry(s.ledger)
	if s.tokens, err = loadTokens(ctx, st.Executor(), now()); err != nil {
		return fail(err)
	}
	disp.ledger, disp.metrics, disp.tokens = s.ledger, s.metrics, s.tokens

	cfg := opt.Policy
	cfg.Name, cfg.Store, cfg.Metrics, cfg.Logger = opt.Consumer, st, s.consumerMetrics, opt.Logger
	cfg.Workers, cfg.BatchSize = opt.Workers, opt.BatchSize
	cfg.ExtendEvery, cfg.ExtendBy = min(10*time.Second, opt.Lease/3), opt.Lease
	cfg.Observer = s.observe
	var tr transport.Transport = s.queue
	if opt.AgentURL != "" {
		cfg.Decide, cfg.Handler = disp.decide, s.applyAgent
		cfg.DecideConcurrency = opt.AgentConcurrency
	} else {
		if err := replay.EnsureRecordTables(ctx, st.DB()); err != nil {
			return fail(fmt.Errorf("create the record handler's tables: %w", err))
		}
		record := replay.RecordHandlerOn(st.DB(), opt.Consumer)
		cfg.Handler = func(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
			if err := record(ctx, tx, ev); err != nil {
				return err
			}
			return s.envelopes.record(ctx, ev, s.consumerNow())
		}
	}
	cfg.Transport = tr
	if opt.Hook != nil {
		cfg.Store = own.Wrap(st, own.Options{Hook: opt.Hook})
	}
	if s.consumer, err = seqbox.NewConsumer(cfg); err != nil {
		return fail(err)
	}
	s.zeroSeries()
	s.publisher = newPublisher(s.publishAccepting)
	s.handler = s.routes()
	return s, nil
}

// zeroSeries creates every series of the consumer's counters at zero, so
// that /metrics lists them before the first event (and rate() works).
func (s *Server) zeroSeries() {
	m, name := s.consumerMetrics, s.opt.Consumer
	for _, o := range seqboxtype.Outcomes() {
		m.Deliveries.WithLabelValues(name, string(o))
	}
	for _, v := range []*prometheus.CounterVec{m.KeyConflicts, m.Redrives, m.MaxBlockAlerts, m.PurgedRows, m.ContractFailure, m.StaleBeforeBaseline,
		s.metrics.purgedEarly} {
		v.WithLabelValues(name)
	}
	for _, v := range []*prometheus.GaugeVec{m.Gaps, m.HeldMessages, m.BlockedKeys, m.OldestStuckAge, m.DLQSize, m.InboxRows} {
		v.WithLabelValues(name)
	}
}

// fillPolicyDefaults gives the retention windows seqbox's defaults
// explicitly, so that the retention endpoint can show them.
func fillPolicyDefaults(c *seqbox.Config) {
	def := seqbox.DefaultPolicies()
	for _, w := range []struct{ v, def *time.Duration }{
		{&c.Retention, &def.Retention}, {&c.RedeliveryWindow, &def.RedeliveryWindow},
		{&c.DLQRetention, &def.DLQRetention}, {&c.RedriveWindow, &def.RedriveWindow},
	} {
		if *w.v == 0 {
			*w.v = *w.def
		}
	}
}

func (s *Server) consumerNow() time.Time {
	if s.opt.Policy.Now != nil {
		return s.opt.Policy.Now()
	}
	return time.Now()
}

// observe is the consumer's Observer: the chart, the check for purged
// identities delivered again, and the agent's decisions, once committed.
func (s *Server) observe(res seqboxtype.Result) {
	s.series.observe(res)
	s.envelopes.committed(res)
	settledByAgent := res.Outcome == seqboxtype.Applied || res.Outcome == seqboxtype.Stale || res.Outcome == seqboxtype.VersionConflict
	if settledByAgent && s.opt.AgentURL != "" {
		if v, ok := s.agentOutcomes.LoadAndDelete(store.Identity{Source: res.Source, ID: res.ID}); ok {
			s.metrics.agentDecisions.WithLabelValues(s.opt.Consumer, v.(string)).Inc()
		}
	}
}

// Committed is how many of the consumer's results with outcome oc were
// committed since the server started (the dashboard's totals): read from
// memory, it costs the database nothing.
func (s *Server) Committed(oc seqboxtype.Outcome) int64 { return s.series.total(oc) }

// Handler is the server's HTTP handler (every endpoint).
func (s *Server) Handler() http.Handler { return s.handler }

// Consumer is the server's consumer.
func (s *Server) Consumer() *seqbox.Consumer { return s.consumer }

// Store is the store of the server's consumer and queue (--db).
func (s *Server) Store() store.Store { return s.store }

// Serve runs the consumer, the retention loop and the HTTP server on ln
// until ctx ends, then shuts down gracefully: intake stops first (requests
// in flight finish: a 202 is only sent once its events are committed),
// then the consumer finishes or returns its in-flight batches, then the
// database closes. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	defer s.Close()
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	runDone := make(chan error, 1)
	go func() { runDone <- s.consumer.Run(runCtx) }()
	var bg sync.WaitGroup
	bg.Go(func() { s.retentionLoop(runCtx) })
	bg.Go(func() {
		s.envelopes.watchTombstones(runCtx, s.store.Executor(), func(n int64) {
			s.metrics.purgedEarly.WithLabelValues(s.opt.Consumer).Add(float64(n))
			s.opt.Logger.Warn("seqbox serve: identities delivered again after retention purged them: retention is too short for the queue's redelivery window",
				"consumer", s.opt.Consumer, "count", n)
		}, s.opt.Logger)
	})

	go s.publisher.run()
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		WriteTimeout: s.opt.RequestWait + time.Minute, IdleTimeout: 2 * time.Minute,
		ErrorLog: nil}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()

	var failure error
	select {
	case <-ctx.Done():
	case err := <-serveDone:
		failure = fmt.Errorf("http server: %w", err)
		serveDone <- nil
	case err := <-runDone:
		if err == nil {
			err = errors.New("stopped")
		}
		failure = fmt.Errorf("consumer: %w", err)
		s.runErr.Store(&failure)
		runDone <- nil
	}
	s.draining.Store(true)
	s.opt.Logger.Info("seqbox serve: shutting down: intake stopped, draining")
	sctx, cancel := context.WithTimeout(context.Background(), s.opt.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.opt.Logger.Warn("seqbox serve: requests still open at the shutdown deadline", "err", err)
		_ = srv.Close()
	}
	<-serveDone
	s.publisher.close()
	// Drain: the agent calls in flight finish within the same deadline,
	// and their results are recorded, before the consumer stops; no new
	// call starts. Stopping at once cancelled them, left their ledger
	// rows uncertain though the agent applied them, and sent each again
	// after the restart.
	if left := s.disp.drain(sctx); left > 0 {
		s.opt.Logger.Warn("seqbox serve: agent calls still open at the shutdown deadline are cancelled; they are reconciled after the restart",
			"consumer", s.opt.Consumer, "calls", left)
	}
	stopRun()
	if err := <-runDone; err != nil && failure == nil {
		failure = fmt.Errorf("consumer: %w", err)
	}
	bg.Wait()
	return failure
}

// errShuttingDown answers an ingest request that arrives during shutdown.
var errShuttingDown = errors.New("shutting down: nothing was queued, send the request again")

// Close releases the queue and the store.
func (s *Server) Close() error {
	var errs []error
	if s.queue != nil {
		errs = append(errs, s.queue.Close())
		s.queue = nil
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
		s.store = nil
	}
	return errors.Join(errs...)
}

// circuitChanged logs a change of the agent's circuit and sets its gauge.
func (s *Server) circuitChanged(open bool, why string, pause time.Duration) {
	logCircuit(s.opt.Logger, s.opt.Consumer)(open, why, pause)
	v := 0.0
	if open {
		v = 1
	}
	s.metrics.agentCircuitOpen.WithLabelValues(s.opt.Consumer).Set(v)
}

// publishAccepting commits a group of ingest requests in one
// transaction: it records the identities that are new (GatewayAccept: the
// unique key decides a race with another request or serve process) and
// queues only their events, so that a copy posted again is answered at
// once and never queued twice. A duplicate is counted as the consumer
// counts one; a collision is parked and audited as the consumer would
// (the dashboard's collisions show it beside the first copy). The events
// are queued grouped by partition key: a key's events are received one at
// a time, in the order they were accepted, each once the one before it
// settled, by whichever serve process (docs/design.md §10.4).
// Without that, a competing process could take a key's second event
// while the first waits in another's hands, and the second would become
// the key's baseline, the first stale.
func (s *Server) publishAccepting(ctx context.Context, g *pubGroup) error {
	// A producer's transaction: on SQLite it takes the one writer before
	// the consumers' waiting batches (writeturn), so that a request waits
	// for at most one of them; the requests that came meanwhile join it.
	tx, err := s.store.Begin(writeturn.Urgent(ctx))
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	g.gather()
	group := g.reqs
	now := s.consumerNow().UTC()
	var copies []store.GatewayCopy
	for _, r := range group {
		for _, ev := range r.evs {
			copies = append(copies, store.GatewayCopy{Source: ev.Source, ID: ev.ID, PayloadHash: ev.Hash, At: now})
		}
	}
	accepted, err := tx.GatewayAccept(ctx, store.GatewayAcceptParams{Consumer: s.opt.Consumer, Copies: copies})
	if err != nil {
		return err
	}
	var bodies [][]byte
	var groups []string
	var met []seqboxtype.Result
	i := 0
	for _, r := range group {
		r.accepted = accepted[i : i+len(r.evs)]
		i += len(r.evs)
		for j, ev := range r.evs {
			a := r.accepted[j]
			if a.New {
				bodies = append(bodies, ev.Raw)
				groups = append(groups, messageGroup(ev))
				continue
			}
			res, err := s.recordSeenAtIngest(ctx, tx, ev, a.First, now)
			if err != nil {
				return err
			}
			met = append(met, res)
		}
	}
	if err := s.queue.PublishGroupedIn(ctx, tx.SQL(), bodies, groups); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if len(bodies) > 0 {
		s.queue.Published()
	}
	for _, res := range met {
		s.consumerMetrics.Deliveries.WithLabelValues(s.opt.Consumer, string(res.Outcome)).Inc()
		s.series.observe(res)
	}
	return nil
}

// messageGroup is the queue's message group of an event: its partition
// key's, or none.
func messageGroup(ev seqboxtype.Event) string {
	if ev.PartitionKey == "" {
		return ""
	}
	return "k:" + ev.PartitionKey
}

// recordSeenAtIngest records, in tx, an event whose identity ingest
// accepted before (first): a duplicate as the consumer counts one (on the
// identity's inbox row, once it has one), a collision parked and audited
// as the consumer would. It returns the event's result.
func (s *Server) recordSeenAtIngest(ctx context.Context, tx store.ExecutorTx, ev seqboxtype.Event, first store.GatewayCopy, now time.Time) (seqboxtype.Result, error) {
	res := seqboxtype.Result{Source: ev.Source, ID: ev.ID, PartitionKey: ev.PartitionKey, ObjectVersion: ev.ObjectVersion, Attempt: 1,
		Outcome: seqboxtype.Duplicate, Reason: "identity already accepted at ingest at " + first.At.Format(time.RFC3339Nano)}
	next := "none"
	if first.PayloadHash != ev.Hash {
		res.Outcome = seqboxtype.Collision
		res.Reason = fmt.Sprintf("identity already accepted at ingest with payload hash %.12s, this one has %.12s", first.PayloadHash, ev.Hash)
		next = "investigate: the producer reused an identity for different content"
		if err := tx.ParkedInsert(ctx, store.Parked{Consumer: s.opt.Consumer, Source: ev.Source, ID: ev.ID, PartitionKey: ev.PartitionKey,
			ObjectVersion: ev.ObjectVersion, Reason: seqboxtype.ParkCollision, Detail: res.Reason, Envelope: ev.Raw,
			PayloadHash: ev.Hash, ParkedAt: now}); err != nil {
			return res, err
		}
	}
	return res, tx.AuditInsert(ctx, store.AuditRow{Consumer: s.opt.Consumer, Source: ev.Source, ID: ev.ID, PartitionKey: ev.PartitionKey,
		ReceivedVersion: ev.ObjectVersion, Outcome: res.Outcome, Reason: res.Reason, NextAction: next, At: now, PayloadHash: ev.Hash})
}
