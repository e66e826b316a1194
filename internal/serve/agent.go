package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/internal/fault"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"go.opentelemetry.io/otel/propagation"
)

// AgentAction is the effect ledger's action name for the agent call: the
// Idempotency-Key sent to the agent is effects.Key(consumer, source, id,
// AgentAction).
const AgentAction = "agent"

// Headers the gateway sends with every agent call.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderPartitionKey   = "Seqbox-Partition-Key"
	HeaderObjectVersion  = "Seqbox-Object-Version"
	HeaderConsumer       = "Seqbox-Consumer"
)

// HeaderResultReference is the header of an agent's 2xx answer that names
// what its effect produced (the task it created): the gateway keeps it on
// the event's inbox row (seqbox.SetResultReference, `seqbox inbox show`).
const HeaderResultReference = "Seqbox-Result-Reference"

// AgentDecision is what the agent said about one event: the decision seqbox
// records under the event's identity (seqbox.DecisionFrom), so a
// redelivery never asks the agent again.
type AgentDecision struct {
	// Outcome is "applied" (2xx), "stale" or "version_conflict" (409, as
	// the problem body says).
	Outcome string `json:"verdict"` // "verdict": the member stored decisions have
	Status  int    `json:"status"`
	// Detail is the agent's problem detail, or the start of its answer.
	Detail string `json:"detail,omitempty"`
	At     string `json:"at"`
	// Ref is what the agent named with HeaderResultReference ("" for
	// nothing).
	Ref string `json:"ref,omitempty"`
}

// dispatcher calls the agent for each event (seqbox.Config.Decide),
// through the effect ledger. seqbox calls it outside any transaction and
// only for an event that is next on its key, passed the inbox and the
// business-key check, and whose key's turn it holds: order, once-only and
// the gate are the pipeline's; the dispatcher adds the HTTP contract of
// docs/design.md §10.3 (no redirects, failure classes, Retry-After, the circuit).
type dispatcher struct {
	url      string
	consumer string
	client   *http.Client
	ledger   *effects.Ledger
	tokens   *tokens
	circuit  *circuit
	metrics  *gatewayMetrics
	now      func() time.Time
	// hook crashes the process at the agent path's fault points (the
	// chaos harness's serve target only).
	hook fault.Hook
	log  *slog.Logger
	// inFlight counts the agent calls open now.
	inFlight atomic.Int64
	// draining: the gateway is shutting down; no new call starts (drain).
	draining atomic.Bool
}

// newAgentClient is the dispatcher's HTTP client: it never follows a
// redirect (a 3xx is the answer, and the dispatch fails with it), so the
// event and its Idempotency-Key never go anywhere but --agent-url. It
// keeps a connection open for each call that may be in flight
// (concurrency), so that no call beyond http.Transport's default two
// dials a connection of its own and closes it after
// (TestAgentClientReusesAConnectionPerCallInFlight;
// docs/benchmarks-history.md §19).
func newAgentClient(timeout time.Duration, concurrency int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = concurrency, concurrency
	return &http.Client{Timeout: timeout, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// decide is Config.Decide: wait while the agent's circuit is open, then
// call the agent through the ledger under the event's Idempotency-Key.
func (a *dispatcher) decide(ctx context.Context, ev seqboxtype.Event) ([]byte, error) {
	if a.draining.Load() {
		return nil, errDraining
	}
	p, err := a.circuit.wait(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			// Decide's own deadline, not a shutdown: the message comes back
			// later without an attempt spent on the agent's outage.
			return nil, &circuitOpenError{err: err}
		}
		return nil, fmt.Errorf("waiting for the agent's circuit to close: %w", err)
	}
	defer p.release()
	if a.draining.Load() { // it began to drain while this one waited
		return nil, errDraining
	}
	ctx = context.WithValue(ctx, eventKey{}, ev)
	ctx = context.WithValue(ctx, passKey{}, p)
	ref, err := a.ledger.Do(ctx, AgentAction, func(ctx context.Context, key string) (string, error) {
		if err := a.hook.At(fault.AfterLedgerPending); err != nil {
			return "", err
		}
		v, err := a.call(ctx, ev, key)
		if herr := a.hook.At(fault.AfterAgentAnswer); herr != nil {
			return "", herr
		}
		if err != nil {
			return "", err
		}
		b, _ := json.Marshal(v)
		return string(b), nil
	})
	if err != nil {
		if effects.IsDefinite(err) {
			return nil, seqbox.Permanent(err)
		}
		return nil, err
	}
	return []byte(ref), nil
}

// circuitOpenError: Decide's deadline passed while the agent's circuit
// was open. It is a wait, not a failure of the message (Wait).
type circuitOpenError struct{ err error }

func (e *circuitOpenError) Error() string {
	return "the agent's circuit stayed open for as long as one decision may take: " + e.err.Error()
}
func (e *circuitOpenError) Unwrap() error { return e.err }

// Wait says the message comes back after a pause, its attempts untouched.
func (e *circuitOpenError) Wait() time.Duration { return circuitMaxPause }

// passKey carries the circuit's pass of the dispatch to call.
type passKey struct{}

// passFrom is the dispatch's pass; a call without one (a test's) reports
// to a throwaway pass, which counts as one dispatch of a closed circuit.
func (a *dispatcher) passFrom(ctx context.Context) *pass {
	if p, ok := ctx.Value(passKey{}).(*pass); ok {
		return p
	}
	a.circuit.mu.Lock()
	defer a.circuit.mu.Unlock()
	return &pass{c: a.circuit, gen: a.circuit.gen}
}

// probe asks whether the agent is up, before a trial call is let through
// the half-open circuit: a HEAD request to --agent-url that any answer but
// 502, 503 or 504 passes. It is a cheap pre-check, never the decision: a
// failed probe keeps the circuit open without any message paying an
// attempt (a restarting agent refuses connections, or its proxy answers
// 502-504, to HEAD as to POST), while a passing one only lets one real
// call go, whose success alone closes the circuit (an agent may answer
// HEAD and still fail every POST).
func (a *dispatcher) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(a.client.Timeout, 5*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, a.url, nil)
	if err != nil {
		return err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		// What a proxy in front of a restarting agent answers. Any other
		// answer (501 from an agent that has no HEAD, 405, 404) comes
		// from a live agent.
		return fmt.Errorf("agent probe answered %s", resp.Status)
	}
	return nil
}

// call POSTs the event to the agent once and maps its answer (docs/design.md
// §10.3):
//   - 2xx applied; 409 stale or version_conflict, as the problem body
//     says; a 3xx a definite failure (never followed); any other 4xx but
//     408 and 429 a definite refusal. Each shows the agent is up.
//   - 408, 429 and 503 say the event was not processed: NotApplied
//     (failed in the ledger, transient), their Retry-After kept for the
//     event's key only (seqbox.RetryAfter). 408 and 429 say nothing about
//     the agent's health; a 503 counts as a down agent's failure.
//   - another 5xx, a timeout or a broken connection may have applied it:
//     uncertain, and a down agent's failure.
//   - a request that never left the process is not uncertain: Definite
//     when net/http refused it before dialling (it can never be sent),
//     and then no news of the agent; NotApplied when the dial failed (a
//     down agent's failure) or ctx ended first.
//
// What the answer shows of the agent's health goes to the circuit through
// the dispatch's pass.
func (a *dispatcher) call(ctx context.Context, ev seqboxtype.Event, key string) (v AgentDecision, err error) {
	defer func() {
		if err != nil && a.log != nil {
			// Every failed agent call is one line naming the event
			// (docs/design.md §14).
			attrs := []any{"consumer", a.consumer, "source", ev.Source, "id", ev.ID, "partitionkey", ev.PartitionKey}
			if v, ok := ev.Version(); ok {
				attrs = append(attrs, "objectversion", v)
			}
			a.log.Warn("seqbox serve: agent call failed", append(attrs, "idempotency_key", key, "err", err)...)
		}
	}()
	a.inFlight.Add(1)
	defer a.inFlight.Add(-1)
	p := a.passFrom(ctx)
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(ev.Raw))
	if err != nil {
		return AgentDecision{}, effects.Definite(err)
	}
	req.Header.Set("Content-Type", mediaStructured)
	req.Header.Set(HeaderIdempotencyKey, key)
	req.Header.Set(HeaderConsumer, a.consumer)
	req.Header.Set(HeaderEffectsToken, a.tokens.mint(a.consumer, ev.Source, ev.ID, ev.Hash))
	// The agent continues the event's trace: ctx carries the decision's
	// span, a child of the producer's context (W3C trace context).
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	if ev.PartitionKey != "" {
		req.Header.Set(HeaderPartitionKey, ev.PartitionKey)
	}
	if v, ok := ev.Version(); ok {
		req.Header.Set(HeaderObjectVersion, strconv.FormatInt(v, 10))
	}
	resp, err := effects.SendOnce(a.client, req)
	if err != nil {
		if effects.IsDefinite(err) {
			// Refused before dialling: nothing reached the agent, and
			// nothing is known of its health.
			a.metrics.agentCalls.WithLabelValues(a.consumer, "not_sent").Inc()
			return AgentDecision{}, err
		}
		a.metrics.agentSeconds.WithLabelValues(a.consumer).Observe(time.Since(start).Seconds())
		result := "error"
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			result = "timeout"
			err = fmt.Errorf("agent did not answer within %s: %w", a.client.Timeout, err)
		}
		a.metrics.agentCalls.WithLabelValues(a.consumer, result).Inc()
		if ctx.Err() == nil || result == "timeout" {
			p.failure(err.Error())
		}
		if errors.Is(err, effects.ErrNotSent) && ctx.Err() == nil {
			// Never sent: the agent is down (or not up yet), which is the
			// circuit's business, not the event's; it comes back without
			// spending an attempt, as while the circuit is open.
			return AgentDecision{}, effects.NotApplied(&agentDownError{err: err})
		}
		return AgentDecision{}, err
	}
	a.metrics.agentSeconds.WithLabelValues(a.consumer).Observe(time.Since(start).Seconds())
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	now := a.now().UTC().Format(time.RFC3339Nano)
	code := resp.StatusCode
	a.metrics.agentCalls.WithLabelValues(a.consumer, statusClass(code)).Inc()
	// keyOnly keeps the Retry-After the agent asked for: it delays this
	// event, and so its key, never the other keys.
	keyOnly := func(err error) error {
		if after, ok := effects.ParseRetryAfter(resp.Header.Get("Retry-After"), a.now()); ok {
			return seqbox.RetryAfter(err, after)
		}
		return err
	}
	switch {
	case code >= 200 && code < 300:
		p.success()
		return AgentDecision{Outcome: string(seqboxtype.Applied), Status: code, Detail: snippet(body), At: now,
			Ref: resp.Header.Get(HeaderResultReference)}, nil
	case code >= 300 && code < 400:
		// Never followed: the event was not delivered, and following
		// would send it (and its Idempotency-Key) elsewhere.
		p.success()
		return AgentDecision{}, effects.Definite(fmt.Errorf("agent answered %s (to %q): redirects are not followed; point --agent-url at the final address",
			resp.Status, resp.Header.Get("Location")))
	case code == http.StatusConflict:
		p.success()
		outcome, detail := conflictOutcome(body)
		return AgentDecision{Outcome: outcome, Status: code, Detail: detail, At: now}, nil
	case code == http.StatusTooManyRequests || code == http.StatusRequestTimeout:
		// Not processed, and no news of the agent's health: a rate limit
		// or a slow upload is this event's (or its key's) business.
		p.release()
		return AgentDecision{}, effects.NotApplied(keyOnly(fmt.Errorf("agent answered %s: %s", resp.Status, snippet(body))))
	case code >= 400 && code < 500:
		p.success()
		return AgentDecision{}, effects.Definite(fmt.Errorf("agent refused the event: %s: %s", resp.Status, snippet(body)))
	case code == http.StatusServiceUnavailable:
		// Unavailable: the agent did not process it (the agent contract;
		// it deduplicates by Idempotency-Key, so calling again is safe
		// even behind a proxy that answered 503 after passing it on).
		err := fmt.Errorf("agent unavailable: %s: %s", resp.Status, snippet(body))
		if w := a.waits(ctx, ev, body, resp.Header.Get("Retry-After")); w > 0 {
			// The agent waits for a call of its own event that runs or may
			// still run elsewhere: no failure of the agent, nor of the event.
			p.release()
			return AgentDecision{}, effects.NotApplied(&agentWaitError{err: err, wait: w})
		}
		p.failure(err.Error())
		return AgentDecision{}, effects.NotApplied(keyOnly(err))
	default:
		err := fmt.Errorf("agent failed: %s: %s", resp.Status, snippet(body))
		p.failure(err.Error())
		return AgentDecision{}, keyOnly(err)
	}
}

// statusClass is the agent-call metric's result for an HTTP status.
func statusClass(code int) string {
	switch {
	case code == http.StatusConflict:
		return "409"
	case code == http.StatusTooManyRequests:
		return "429"
	case code >= 200 && code < 300:
		return "2xx"
	case code >= 300 && code < 400:
		return "3xx"
	case code >= 400 && code < 500:
		return "4xx"
	}
	return "5xx"
}

// reconcile is the ledger's Reconciler for an uncertain agent call. The
// agent contract is that the agent deduplicates by Idempotency-Key, so
// asking again under the same key is how the gateway learns whether the
// first call took effect: a 2xx or a 409 settles it (applied, with the
// decision as its reference); a refusal means it did not, and the ledger
// lets the next call go out; anything else leaves it uncertain, to be
// retried with backoff.
func (a *dispatcher) reconcile(ctx context.Context, e effects.Effect) (effects.Reconciliation, error) {
	ev, ok := ctx.Value(eventKey{}).(seqboxtype.Event)
	if !ok {
		return effects.Reconciliation{}, errors.New("no event in the context to send again")
	}
	v, err := a.call(ctx, ev, e.IdempotencyKey)
	switch {
	case err == nil:
		b, _ := json.Marshal(v)
		return effects.Reconciliation{Applied: true, Ref: string(b)}, nil
	case effects.IsDefinite(err):
		return effects.Reconciliation{Applied: false}, nil
	}
	return effects.Reconciliation{}, err
}

// eventKey carries the event being dispatched to reconcile.
type eventKey struct{}

// conflictOutcome reads a 409's problem body: its "outcome" member, or a
// "type" or "title" naming stale or version_conflict. The default is
// version_conflict.
func conflictOutcome(body []byte) (string, string) {
	var p struct {
		Type, Title, Detail, Outcome string
	}
	_ = json.Unmarshal(body, &p)
	detail := p.Detail
	if detail == "" {
		detail = snippet(body)
	}
	for _, s := range []string{p.Outcome, p.Type, p.Title} {
		s = strings.ToLower(s)
		if strings.Contains(s, "stale") {
			return string(seqboxtype.Stale), detail
		}
		if strings.Contains(s, "version_conflict") || strings.Contains(s, "version-conflict") || strings.Contains(s, "version conflict") {
			return string(seqboxtype.VersionConflict), detail
		}
	}
	return string(seqboxtype.VersionConflict), detail
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 512 {
		s = s[:512] + "…"
	}
	return strings.ToValidUTF8(s, "�")
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// apply is the handler in agent mode: the agent's decision was recorded
// by decide; the gateway keeps the envelope and counts its outcome. A 409
// settles the event as stale or version_conflict (seqbox.Settle).
func (s *Server) applyAgent(ctx context.Context, tx seqbox.Tx, ev seqboxtype.Event) error {
	raw, ok := seqbox.DecisionFrom(ctx)
	if !ok {
		return errors.New("no agent decision recorded")
	}
	var v AgentDecision
	if err := json.Unmarshal(raw, &v); err != nil {
		return seqbox.Permanent(fmt.Errorf("unreadable agent decision %q: %w", raw, err))
	}
	s.agentOutcomes.Store(store.Identity{Source: ev.Source, ID: ev.ID}, v.Outcome)
	switch seqboxtype.Outcome(v.Outcome) {
	case seqboxtype.Stale, seqboxtype.VersionConflict:
		// The agent's object is newer than the gate could know: the event
		// ends stale or version_conflict, and its key moves on.
		return seqbox.Conclude(seqboxtype.Outcome(v.Outcome), fmt.Sprintf("the agent answered %d: %s", v.Status, v.Detail))
	}
	if v.Ref != "" {
		if err := seqbox.SetResultReference(ctx, v.Ref); err != nil {
			// The effect took place: an unfit name of it costs the event
			// nothing but the name.
			s.opt.Logger.Warn("seqbox serve: the agent's result reference is left out", "consumer", s.opt.Consumer,
				"source", ev.Source, "id", ev.ID, "err", err)
		}
	}
	return s.envelopes.record(ctx, ev, s.consumerNow())
}
