package serve

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/effects"
	"github.com/seqbox/seqbox/store"
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

// Verdict is what the agent said about one event: the decision seqbox
// records under the event's identity (seqbox.DecisionFrom), so a
// redelivery never asks the agent again.
type Verdict struct {
	// Verdict is "applied" (2xx), "stale" or "version_conflict" (409, as
	// the problem body says).
	Verdict string `json:"verdict"`
	Status  int    `json:"status"`
	// Detail is the agent's problem detail, or the start of its answer.
	Detail string `json:"detail,omitempty"`
	At     string `json:"at"`
}

// errNotNext is returned by the dispatcher's Decide when the event is not
// next on its key yet (a gap, or a blocked key): the agent is not called,
// and the pipeline holds or parks the event; when it is released, it is
// dispatched then.
var errNotNext = errors.New("not next on its key: not dispatched")

// dispatcher calls the agent for each event, outside the inbox
// transaction (seqbox.Config.Decide), through the effect ledger.
type dispatcher struct {
	url      string
	consumer string
	client   *http.Client
	ledger   *effects.Ledger
	seq      *sequencer
	op       store.Executor
	advance  bool          // GapPolicy advance: a gap does not hold
	maxAge   time.Duration // the business deadline (0: none)
	db       *sql.DB
	metrics  *gatewayMetrics
	now      func() time.Time
}

// decide is Config.Decide: wait for the key's earlier deliveries, check
// the gate as far as it can be checked outside the transaction, then call
// the agent through the ledger. A message released from the parked table
// inside a transaction (after its gap closed, or by a redrive) is
// dispatched there directly: the ledger's pending row cannot commit
// inside the open transaction.
func (a *dispatcher) decide(ctx context.Context, ev seqbox.Event) ([]byte, error) {
	id, _ := seqbox.IdentityFrom(ctx)
	key := effects.Key(a.consumer, ev.Source, ev.ID, AgentAction)
	if id.InTransaction {
		v, err := a.call(ctx, ev, key)
		return a.result(v, err)
	}
	if ev.PartitionKey != "" {
		if err := a.seq.waitTurn(ctx, ev.PartitionKey, ev.Source, ev.ID); err != nil {
			return nil, err
		}
	}
	if err := a.gate(ctx, ev); err != nil {
		return nil, err
	}
	ctx = context.WithValue(ctx, eventKey{}, ev)
	ref, err := a.ledger.Do(ctx, AgentAction, func(ctx context.Context, key string) (string, error) {
		v, err := a.call(ctx, ev, key)
		if err != nil {
			return "", err
		}
		b, _ := json.Marshal(v)
		return string(b), nil
	})
	if err != nil {
		return a.result(Verdict{}, err)
	}
	return []byte(ref), nil
}

// result turns a call's outcome into Decide's: a definite refusal is
// permanent (dead-lettered), anything else transient (retried with
// backoff, under the same Idempotency-Key).
func (a *dispatcher) result(v Verdict, err error) ([]byte, error) {
	if err != nil {
		if effects.IsDefinite(err) {
			return nil, seqbox.Permanent(err)
		}
		return nil, err
	}
	return json.Marshal(v)
}

// gate refuses, before any agent call, an event that the pipeline will
// not apply now: past its business deadline, a business key already
// applied, a blocked key, an old version, or a gap under GapHold. The
// pipeline decides for real, under the key's lock.
func (a *dispatcher) gate(ctx context.Context, ev seqbox.Event) error {
	if a.maxAge > 0 && !ev.Time.IsZero() && a.now().Sub(ev.Time) > a.maxAge {
		return fmt.Errorf("%w: past the %s business deadline", errNotNext, a.maxAge)
	}
	if ev.BusinessKey != "" {
		done, err := businessKeyApplied(ctx, a.db, a.consumer, ev.BusinessKey)
		if err != nil || done {
			if err == nil {
				err = fmt.Errorf("%w: business key %q already applied", errNotNext, ev.BusinessKey)
			}
			return err
		}
	}
	if ev.PartitionKey == "" {
		return nil
	}
	kv, err := a.op.KeyViewGet(ctx, store.KeyRef{Consumer: a.consumer, Key: ev.PartitionKey})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if kv.Blocked {
		return fmt.Errorf("%w: key %s is blocked", errNotNext, ev.PartitionKey)
	}
	v, ok := ev.Version()
	if !ok || kv.Version == nil {
		return nil
	}
	switch {
	case v <= *kv.Version:
		return fmt.Errorf("%w: version %d is not after %d", errNotNext, v, *kv.Version)
	case v > *kv.Version+1 && !a.advance:
		return fmt.Errorf("%w: version %d after %d leaves a gap", errNotNext, v, *kv.Version)
	}
	return nil
}

// call POSTs the event to the agent once and maps its answer: 2xx
// applied; 409 stale or version_conflict, as the problem body says; any
// other 4xx a definite refusal; 5xx, a timeout or a broken connection an
// error that may have applied (uncertain).
func (a *dispatcher) call(ctx context.Context, ev seqbox.Event, key string) (Verdict, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(ev.Raw))
	if err != nil {
		return Verdict{}, effects.Definite(err)
	}
	req.Header.Set("Content-Type", mediaStructured)
	req.Header.Set(HeaderIdempotencyKey, key)
	req.Header.Set(HeaderConsumer, a.consumer)
	if ev.PartitionKey != "" {
		req.Header.Set(HeaderPartitionKey, ev.PartitionKey)
	}
	if v, ok := ev.Version(); ok {
		req.Header.Set(HeaderObjectVersion, strconv.FormatInt(v, 10))
	}
	resp, err := a.client.Do(req)
	a.metrics.agentSeconds.WithLabelValues(a.consumer).Observe(time.Since(start).Seconds())
	if err != nil {
		result := "error"
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			result = "timeout"
			err = fmt.Errorf("agent did not answer within %s: %w", a.client.Timeout, err)
		}
		a.metrics.agentCalls.WithLabelValues(a.consumer, result).Inc()
		return Verdict{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	now := a.now().UTC().Format(time.RFC3339Nano)
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		a.metrics.agentCalls.WithLabelValues(a.consumer, "2xx").Inc()
		return Verdict{Verdict: string(seqbox.Applied), Status: code, Detail: snippet(body), At: now}, nil
	case code == http.StatusConflict:
		a.metrics.agentCalls.WithLabelValues(a.consumer, "409").Inc()
		verdict, detail := conflictVerdict(body)
		return Verdict{Verdict: verdict, Status: code, Detail: detail, At: now}, nil
	case code >= 400 && code < 500:
		a.metrics.agentCalls.WithLabelValues(a.consumer, "4xx").Inc()
		return Verdict{}, effects.Definite(fmt.Errorf("agent refused the event: %s: %s", resp.Status, snippet(body)))
	default:
		a.metrics.agentCalls.WithLabelValues(a.consumer, "5xx").Inc()
		return Verdict{}, fmt.Errorf("agent failed: %s: %s", resp.Status, snippet(body))
	}
}

// reconcile is the ledger's Reconciler for an uncertain agent call. The
// agent contract is that the agent deduplicates by Idempotency-Key, so
// asking again under the same key is how the gateway learns whether the
// first call took effect: a 2xx or a 409 settles it (applied, with the
// verdict as its reference); a refusal means it did not, and the ledger
// lets the next call go out; anything else leaves it uncertain, to be
// retried with backoff.
func (a *dispatcher) reconcile(ctx context.Context, e effects.Effect) (effects.Reconciliation, error) {
	ev, ok := ctx.Value(eventKey{}).(seqbox.Event)
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

// conflictVerdict reads a 409's problem body: its "outcome" member, or a
// "type" or "title" naming stale or version_conflict. The default is
// version_conflict.
func conflictVerdict(body []byte) (string, string) {
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
			return string(seqbox.Stale), detail
		}
		if strings.Contains(s, "version_conflict") || strings.Contains(s, "version-conflict") || strings.Contains(s, "version conflict") {
			return string(seqbox.VersionConflict), detail
		}
	}
	return string(seqbox.VersionConflict), detail
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

// apply is the handler in agent mode: the agent's verdict was recorded
// by decide; the gateway keeps the envelope and counts the verdict. A 409
// settles the event as stale or version_conflict (seqbox.Settle).
func (s *Server) applyAgent(ctx context.Context, tx seqbox.Tx, ev seqbox.Event) error {
	raw, ok := seqbox.DecisionFrom(ctx)
	if !ok {
		return errors.New("no agent verdict recorded")
	}
	var v Verdict
	if err := json.Unmarshal(raw, &v); err != nil {
		return seqbox.Permanent(fmt.Errorf("unreadable agent verdict %q: %w", raw, err))
	}
	s.verdicts.Store(identHash(s.opt.Consumer, ev.Source, ev.ID), v.Verdict)
	switch seqbox.Outcome(v.Verdict) {
	case seqbox.Stale, seqbox.VersionConflict:
		// The agent's object is newer than the gate could know: the event
		// ends stale or version_conflict, and its key moves on.
		return seqbox.Settle(seqbox.Outcome(v.Verdict), fmt.Sprintf("the agent answered %d: %s", v.Status, v.Detail))
	}
	return s.envelopes.record(ctx, tx, ev, s.consumerNow())
}
