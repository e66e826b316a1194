package effects

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/internal/ride"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// State is where one external call stands (seqboxtype.Effect).
type State = seqboxtype.Effect

// The states of a ledger row.
const (
	// Pending: committed before the call; the call has not reported back.
	Pending = seqboxtype.EffectPending
	// Succeeded: the remote side applied the effect; Ref names it there.
	Succeeded = seqboxtype.EffectSucceeded
	// Failed: the remote side said it did not apply the effect; another
	// attempt may call again with the same idempotency key.
	Failed = seqboxtype.EffectFailed
	// Uncertain: nobody knows whether the remote side applied it.
	Uncertain = seqboxtype.EffectUncertain
)

// Effect is one row of the ledger.
type Effect struct {
	// Consumer is the consumer of the message that made the call.
	Consumer string `json:"consumer"`
	// Source is the message's source attribute.
	Source string `json:"source"`
	// ID is the message's id attribute.
	ID string `json:"id"`
	// Action names the call ("crm.create_task"): the ledger keeps one row
	// per message and action.
	Action string `json:"action"`
	// IdempotencyKey is the key the call passes to the remote side,
	// Key(Consumer, Source, ID, Action); unique in the ledger.
	IdempotencyKey string `json:"idempotency_key"`
	// State is where the call stands. List shows a pending call whose
	// lease ran out as uncertain.
	State State `json:"state"`
	// Ref is the remote side's reference for the effect once the call
	// succeeded (from the call, a reconciliation or Resolve); empty before.
	Ref string `json:"ref"`
	// LastError is the latest failed call's error, or a note on the row: a
	// reconciliation's finding, an operator's resolution (who and why), a
	// refused late answer.
	LastError string `json:"last_error"`
	// Calls counts the calls made under the key, the first included: each
	// time the row turned pending. A Reconciler's own lookups are not
	// counted (the gateway's sends the request again under the key).
	Calls int `json:"calls"`
	// CreatedAt is when the row was written, before the first call.
	CreatedAt time.Time `json:"created_at"`
	// UpdatedAt is when the row last changed state, reference or error (a
	// lease renewal does not count).
	UpdatedAt time.Time `json:"updated_at"`
	// UncertainAt is when the call first turned uncertain, if it did.
	UncertainAt *time.Time `json:"uncertain_at,omitempty"`
	// ReconciledAt is when a reconciliation last answered for it.
	ReconciledAt *time.Time `json:"reconciled_at,omitempty"`
	// LeaseUntil, for a pending call, is until when its caller's
	// heartbeat vouches that the call is still running. A pending call
	// past it never reported back (its caller died): it is uncertain, and
	// List shows it so.
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
}

// Reconciliation is what the remote side says about an uncertain call.
type Reconciliation struct {
	// Applied: the remote side has the effect; Ref names it.
	Applied bool
	// Ref is the remote side's reference for the effect when Applied: it
	// becomes the row's Ref.
	Ref string
}

// Reconciler asks the remote side whether an uncertain call took effect,
// by e.IdempotencyKey or e.Ref. An error leaves the effect uncertain, to
// be asked again on the next attempt.
type Reconciler func(ctx context.Context, e Effect) (Reconciliation, error)

// Config configures a Ledger. Zero values take the defaults.
type Config struct {
	// Reconcile checks uncertain calls. Nil: an uncertain call stays
	// uncertain (Do returns an *UncertainError) until an operator
	// resolves it.
	Reconcile Reconciler
	// Timeout bounds each call; a call that exceeds it is uncertain.
	// Default 30s.
	Timeout time.Duration
	// Heartbeat is how often a call in flight renews the lease of its
	// pending row. A pending row whose lease is three heartbeats old
	// belongs to a caller that died: the next attempt turns it uncertain
	// and reconciles it. Default 1s.
	Heartbeat time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger gets one line per failed call (failed or uncertain), naming
	// the message, the action and the error. Default slog.Default().
	Logger *slog.Logger
}

// Ledger records external calls in the store's database (the
// seqbox_effects table the store's migrations create).
type Ledger struct {
	ex store.Effects
	// claims reads the decision claims: a call is not resolved by hand
	// while its message is being decided (Resolve).
	claims store.Decisions
	cfg    Config
	// calls and reconcileTime are the counter and the histogram the
	// Collector exposes: kept by every ledger, read only where it is
	// registered.
	calls         *prometheus.CounterVec
	reconcileTime *prometheus.HistogramVec
}

// New returns a ledger on st's database.
func New(st store.Store, cfg Config) (*Ledger, error) {
	if st == nil {
		return nil, errors.New("effects: store is required")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("effects: Timeout %s is negative", cfg.Timeout)
	}
	if cfg.Heartbeat < 0 {
		return nil, fmt.Errorf("effects: Heartbeat %s is negative", cfg.Heartbeat)
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Ledger{ex: st.Executor(), claims: st.Executor(), cfg: cfg,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seqbox_effects_calls_total",
			Help: "External calls whose outcome was recorded, by result: succeeded, refused (the remote side did not apply it) or uncertain."},
			[]string{"consumer", "action", "result"}),
		reconcileTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "seqbox_effects_reconcile_seconds",
			Help:    "From a call turning uncertain to its reconciliation, by what the remote side had: applied or absent.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2.5, 14)}, []string{"consumer", "action", "found"}),
	}, nil
}

// ErrNoIdentity is returned by Do when ctx is not a Decider's or Handler's.
var ErrNoIdentity = errors.New("effects: the context carries no message identity: call Do from Config.Decide, or use DoFor")

// ErrInTransaction is returned by Do inside the inbox transaction, marked
// seqbox.Permanent: a Handler that returns it dead-letters its message at
// once (errors.Is finds it).
var ErrInTransaction = errors.New("effects: Do runs inside the inbox transaction, where its pending row cannot commit before the call: call it from Config.Decide")

// UncertainError says a call may or may not have taken effect. It is not
// re-executed until it is reconciled.
type UncertainError struct {
	// IdempotencyKey is the uncertain call's key.
	IdempotencyKey string
	// Err is why it is uncertain: the call's error, or why reconciling it
	// did not settle it.
	Err error
	// Until, when set, is when a reconciliation that found nothing may
	// let the call go again (the uncertain call may still be running at
	// the remote side until then).
	Until time.Time
}

// ReconcileWaitError is the UncertainError of a reconciliation that found
// nothing while the uncertain call may still be running at the remote
// side (within Timeout of it): a wait until Until, not a failure. A
// consumer waits that long without spending an attempt (its Wait), and
// the next reconciliation past Until lets the call go again; errors.As
// finds the UncertainError in it.
type ReconcileWaitError struct {
	*UncertainError
	wait time.Duration
}

// Wait is how long until the call may go again, at least 100 ms.
func (e *ReconcileWaitError) Wait() time.Duration { return max(e.wait, 100*time.Millisecond) }

// Unwrap returns the UncertainError.
func (e *ReconcileWaitError) Unwrap() error { return e.UncertainError }

// Error implements error: the call's idempotency key and Err.
func (e *UncertainError) Error() string {
	return fmt.Sprintf("effects: call %s is uncertain: %v", e.IdempotencyKey, e.Err)
}

// Unwrap returns Err.
func (e *UncertainError) Unwrap() error { return e.Err }

// InFlightError says a call under the same idempotency key is running in
// a live caller right now. It is transient: try again later, when the
// call has reported back (or its caller's heartbeat stopped).
type InFlightError struct {
	// IdempotencyKey is the key of the call in flight.
	IdempotencyKey string
	// Until is when the caller's lease runs out unless renewed.
	Until time.Time
}

// Wait says the message waits for the call instead of failing: another
// attempt of it counts no attempt (the consumer retries it after d).
func (e *InFlightError) Wait() time.Duration { return max(time.Until(e.Until), 100*time.Millisecond) }

// Error implements error: the call's idempotency key and when its
// caller's lease runs out.
func (e *InFlightError) Error() string {
	return fmt.Sprintf("effects: call %s is in flight in a live caller (lease until %s)", e.IdempotencyKey, e.Until.Format(time.RFC3339Nano))
}

// Key is the idempotency key of action for the message (consumer, source,
// id): the same inputs always give the same key, and different ones a
// different key.
func Key(consumer, source, id, action string) string {
	h := sha256.New()
	for _, s := range []string{consumer, source, id, action} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return "sbx-" + hex.EncodeToString(h.Sum(nil)[:20])
}

// Call is an external call. It receives the idempotency key to pass to the
// remote side, and returns the remote reference of what it created.
type Call func(ctx context.Context, idempotencyKey string) (ref string, err error)

// Do runs call at most once per message and action, as far as the remote
// side honours the idempotency key, and returns its reference. A call
// already succeeded returns its recorded reference without calling. An
// error returned by call is recorded as failed when wrapped with Definite
// or NotApplied, and as uncertain otherwise; Do then returns it (an
// *UncertainError for uncertain ones). An answer that comes after the row
// was recorded by someone else (an operator's resolution of a caller that
// looked dead) is refused with a *ConflictError. Inside a Decider, a
// succeeded call's record is written in the same commit as the decision
// made from it (docs/design.md §11): Do returns before it is written.
// Past the event's business deadline (its Decider's Identity.Deadline) Do
// makes no new call: it returns an error matching seqbox.ErrPastDeadline,
// and still returns or reconciles a call made before it.
func (l *Ledger) Do(ctx context.Context, action string, call Call) (string, error) {
	id, ok := seqbox.IdentityFrom(ctx)
	if !ok {
		return "", ErrNoIdentity
	}
	if id.InTransaction {
		// Permanent: it cannot succeed there, however often it is
		// retried; the message is dead-lettered for its code to change.
		return "", seqbox.Permanent(ErrInTransaction)
	}
	return l.DoFor(ctx, id, action, call)
}

// DoFor is Do for an identity given explicitly, for code outside a
// Decider (its InTransaction is ignored: the caller vouches for it).
func (l *Ledger) DoFor(ctx context.Context, id seqboxtype.Identity, action string, call Call) (_ string, err error) {
	if err := checkAction(action); err != nil {
		return "", err
	}
	if id.Consumer == "" || id.Source == "" || id.ID == "" {
		return "", fmt.Errorf("effects: identity %+v is incomplete: consumer, source and id are required", id)
	}
	if call == nil {
		// Nothing can leave the process: refused before a row exists
		// (a panic inside a call, which may have reached the remote
		// side, is recorded uncertain).
		return "", seqbox.Permanent(fmt.Errorf("effects: %s: the call is nil", action))
	}
	ctx, span := startSpan(ctx, action, Key(id.Consumer, id.Source, id.ID, action))
	defer func() { endSpan(span, err) }()
	// An earlier call of this Decider whose record waits to ride with the
	// decision is recorded first: no call begins while another's result
	// is unwritten.
	if err := ride.From(ctx).Flush(ctx); err != nil {
		return "", err
	}
	b, err := l.begin(ctx, id, action, l.cfg.Reconcile)
	if err != nil || !b.Granted {
		return b.Ref, err
	}
	return l.call(ctx, b.Effect, call)
}

// begin finds the row of (id, action) and takes it for a call when a
// call may go now (Begun.Granted), following the ledger's states: a
// succeeded row is returned as it is, a live pending one is an
// *InFlightError, a dead caller's pending one turns uncertain, an
// uncertain one is reconciled with reconcile (nil: an *UncertainError),
// and a new or failed one is taken, counting a call. Past the identity's
// business deadline (Identity.Deadline) nothing is taken: a call made
// before it is resolved, and a new one is refused (ErrPastDeadline).
func (l *Ledger) begin(ctx context.Context, id seqboxtype.Identity, action string, reconcile Reconciler) (Begun, error) {
	key := Key(id.Consumer, id.Source, id.ID, action)
	fresh := Effect{Consumer: id.Consumer, Source: id.Source, ID: id.ID, Action: action, IdempotencyKey: key, State: Pending, Calls: 1}
	late := !id.Deadline.IsZero() && l.cfg.Now().After(id.Deadline)
	// The first call of a key is the common case: its pending row is
	// written without a look first, and a row that exists is read then.
	if !late {
		if inserted, err := l.insertPending(ctx, fresh); err != nil || inserted {
			return Begun{Effect: fresh, Granted: inserted}, err
		}
	}
	for range 3 {
		e, found, err := l.read(ctx, fresh)
		if err != nil {
			return Begun{}, err
		}
		if !found || (late && e.State == Failed) {
			if late {
				return Begun{}, pastDeadline(key, id.Deadline)
			}
			inserted, err := l.insertPending(ctx, fresh)
			if err != nil {
				return Begun{}, err
			}
			if !inserted {
				continue // another member inserted it first: look again
			}
			return Begun{Effect: fresh, Granted: true}, nil
		}
		switch e.State {
		case Succeeded:
			return Begun{Effect: e}, nil
		case Pending:
			if l.live(e) {
				// Its caller is alive and the call still runs: asking again
				// now would be a second call, and turning it uncertain
				// would lie about a call that may yet answer.
				return Begun{}, &InFlightError{IdempotencyKey: key, Until: *e.LeaseUntil}
			}
			// A call that never reported back: its caller died after the
			// request may have been sent. Nobody knows.
			if err := l.setState(ctx, e, Uncertain, "", "a pending call never reported back (crash, or lease lost mid-call)", Pending); err != nil {
				return Begun{}, err
			}
			continue
		case Uncertain:
			ref, again, err := l.reconcile(ctx, e, reconcile)
			if err != nil {
				return Begun{}, err
			}
			if !again {
				e.State, e.Ref = Succeeded, ref
				return Begun{Effect: e}, nil
			}
			continue
		case Failed:
			claimed, err := l.transition(ctx, e, Failed, Pending)
			if err != nil {
				return Begun{}, err
			}
			if claimed {
				e.State = Pending
				e.Calls++ // the transition counted this call
				return Begun{Effect: e, Granted: true}, nil
			}
			continue
		default:
			return Begun{}, fmt.Errorf("effects: %s is in unknown state %q", key, e.State)
		}
	}
	return Begun{}, fmt.Errorf("effects: %s kept changing under this attempt; try again", key)
}

// checkAction refuses an empty action or one with control characters.
func checkAction(action string) error {
	if strings.TrimSpace(action) == "" {
		return errors.New("effects: action is empty: name the call (\"crm.create_task\")")
	}
	if strings.IndexFunc(action, unicode.IsControl) >= 0 {
		return fmt.Errorf("effects: action %q contains a control character", action)
	}
	return nil
}

// call runs the call for a row this attempt holds as pending (its
// e.Calls-th call), and records what came of it (record).
func (l *Ledger) call(ctx context.Context, e Effect, call Call) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	stop := l.heartbeat(cctx, e)
	ref, err := safeCall(cctx, call, e.IdempotencyKey)
	stop()
	if err != nil && !IsNotApplied(err) && cctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("no answer within %s: %w", l.cfg.Timeout, err)
	}
	// Succeeded inside a Decider: the record rides with the decision
	// (package ride), one commit after the call instead of two.
	if err == nil && ride.From(ctx).Hold(e.Consumer, e.Source, e.ID, ride.Held{
		Params: store.EffectRecordParams{Call: e.call(), IdempotencyKey: e.IdempotencyKey, From: []State{Pending, Uncertain}, To: Succeeded,
			Ref: ref, At: l.cfg.Now(), Calls: e.Calls},
		Record: func(ctx context.Context) error {
			_, err := l.record(ctx, e, ref, nil)
			return err
		},
	}) {
		return ref, nil
	}
	return l.record(ctx, e, ref, err)
}

// record records what came of the e.Calls-th call of a row: succeeded
// with ref when err is nil, failed when err is NotApplied (or Definite),
// uncertain otherwise; unless the row stopped being this call's
// meanwhile (refuse). It returns ref, or err (an *UncertainError for an
// uncertain call).
func (l *Ledger) record(ctx context.Context, e Effect, ref string, err error) (string, error) {
	// The outcome is recorded even when ctx ends: it is what happened.
	rctx := context.WithoutCancel(ctx)
	to, lastError := Uncertain, ""
	switch {
	case err == nil:
		to = Succeeded
	case IsNotApplied(err):
		to, lastError = Failed, err.Error()
	default:
		lastError = err.Error()
	}
	if err != nil {
		l.logFailure(ctx, e, to, err)
	}
	// The write is the call's own, in one conditional statement: the row
	// still counts this call (Calls) and is pending, or uncertain only
	// because this call's lease ran out (its caller was slow, not dead). A
	// caller whose heartbeat stopped (a frozen process) may answer after
	// an operator resolved its call, or another attempt reconciled it and
	// called again: its answer must not overwrite theirs.
	from := []State{Pending, Uncertain}
	if to == Uncertain {
		from = from[:1]
	}
	serr := l.ex.EffectRecord(rctx, store.EffectRecordParams{Call: e.call(), IdempotencyKey: e.IdempotencyKey, From: from, To: to, Ref: ref,
		LastError: lastError, At: l.cfg.Now(), Calls: e.Calls})
	if errors.Is(serr, store.ErrNotFound) {
		// Left alone: the row is not this call's any more (another call
		// counted since, or recorded for good by an operator or another
		// attempt's reconciliation), and this answer is refused; unless another attempt turned it
		// uncertain first, which is what this call says too.
		cur, found, gerr := l.read(rctx, e)
		switch {
		case gerr != nil:
			serr = gerr
		case !found:
			serr = nil // purged meanwhile: nothing left to record on
		case to == Uncertain && cur.State == Uncertain && cur.Calls == e.Calls:
			serr = nil
		default:
			return "", l.refuse(rctx, cur, to, ref, err)
		}
	}
	if serr != nil {
		serr = fmt.Errorf("effects: record %s %s: %w", e.IdempotencyKey, to, serr)
		if err == nil {
			return "", fmt.Errorf("effects: %s succeeded remotely (ref %q) but could not be recorded (the next attempt reconciles it): %w", e.IdempotencyKey, ref, serr)
		}
		return "", errors.Join(err, serr)
	}
	l.calls.WithLabelValues(e.Consumer, e.Action, callResult(to)).Inc()
	switch to {
	case Succeeded:
		return ref, nil
	case Failed:
		return "", err
	}
	return "", &UncertainError{IdempotencyKey: e.IdempotencyKey, Err: err}
}

// ConflictError says a call answered after its row stopped being its
// own: an operator resolved it (seqbox effects resolve), or another
// attempt reconciled it or called again, while this caller was frozen
// past its lease. The ledger keeps what they recorded and refuses the
// late answer, and the message follows the ledger on its next attempt
// (succeeded: its reference; failed: call again under the same key). It
// is a wait, not a failure of the message (Wait).
type ConflictError struct {
	// IdempotencyKey is the key of the call that answered late.
	IdempotencyKey string
	// State is the row's state that stands.
	State State
	// Answer is what the late call said.
	Answer string
}

// Error implements error: the call's idempotency key, its late Answer,
// and the State the ledger keeps.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("effects: call %s answered (%s) after its row was recorded %s by someone else (an operator, or another attempt): the ledger keeps %s, and the answer is refused",
		e.IdempotencyKey, e.Answer, e.State, e.State)
}

// Wait says the message comes back soon, without an attempt counted: the
// next attempt reads the row and follows it.
func (e *ConflictError) Wait() time.Duration { return 100 * time.Millisecond }

// refuse records, on the row that stands, that a late answer was refused,
// logs it, and returns the ConflictError.
func (l *Ledger) refuse(ctx context.Context, cur Effect, to State, ref string, callErr error) error {
	answer := string(to)
	switch {
	case callErr != nil:
		answer += ": " + callErr.Error()
	case ref != "":
		answer += " (ref " + ref + ")"
	}
	c := &ConflictError{IdempotencyKey: cur.IdempotencyKey, State: cur.State, Answer: answer}
	l.cfg.Logger.WarnContext(ctx, "seqbox: a late answer of an external call was refused", "consumer", cur.Consumer, "source", cur.Source,
		"id", cur.ID, "action", cur.Action, "idempotency_key", cur.IdempotencyKey, "state", string(cur.State), "answer", answer)
	if cur.State == Succeeded || cur.State == Failed {
		// Said on the row, its state and reference unchanged (a row that
		// moved on meanwhile is left alone).
		note := strings.TrimPrefix(cur.LastError+"; ", "; ") + "refused a late answer of an earlier call: " + answer
		_ = l.setState(ctx, cur, cur.State, cur.Ref, note, cur.State)
	}
	return c
}

// pastDeadline refuses a new call of key past the business deadline.
func pastDeadline(key string, deadline time.Time) error {
	return fmt.Errorf("effects: %s: no new call past %s: %w", key, deadline.Format(time.RFC3339Nano), seqbox.ErrPastDeadline)
}

// logFailure is the one line a failed call gets.
func (l *Ledger) logFailure(ctx context.Context, e Effect, st State, err error) {
	l.cfg.Logger.WarnContext(ctx, "seqbox: external call failed", "consumer", e.Consumer, "source", e.Source, "id", e.ID,
		"action", e.Action, "idempotency_key", e.IdempotencyKey, "state", string(st), "err", err)
}

// reconcile asks rec (Config.Reconcile for Do) about an uncertain call.
// It returns the reference when the remote side has the effect, and
// again=true when the remote side does not and this attempt may call
// again.
func (l *Ledger) reconcile(ctx context.Context, e Effect, rec Reconciler) (ref string, again bool, err error) {
	if rec == nil {
		return "", false, &UncertainError{IdempotencyKey: e.IdempotencyKey,
			Err: fmt.Errorf("no Reconcile configured; resolve it with `seqbox effects resolve` (last error: %s)", e.LastError)}
	}
	r, err := rec(ctx, e)
	if err != nil {
		return "", false, &UncertainError{IdempotencyKey: e.IdempotencyKey, Err: fmt.Errorf("reconcile: %w", err)}
	}
	return l.reconciled(ctx, e, r)
}

// reconciled records what a reconciliation found for the uncertain row e.
func (l *Ledger) reconciled(ctx context.Context, e Effect, r Reconciliation) (ref string, again bool, err error) {
	if r.Applied {
		if err := l.update(ctx, e, Succeeded, r.Ref, "", true, Uncertain); err != nil {
			return "", false, err
		}
		l.observeReconciled(e, "applied")
		return r.Ref, false, nil
	}
	if since := e.UpdatedAt; l.cfg.Now().Sub(since) < l.cfg.Timeout {
		// A call that timed out may still be running at the remote side,
		// and apply after this answer: calling again now could make the
		// effect twice. Ask again once a whole Timeout has passed since
		// the row last turned uncertain (UpdatedAt; UncertainAt is the
		// first time, which an earlier round may have set).
		until := since.Add(l.cfg.Timeout)
		return "", false, &ReconcileWaitError{wait: until.Sub(l.cfg.Now()), UncertainError: &UncertainError{IdempotencyKey: e.IdempotencyKey, Until: until,
			Err: fmt.Errorf("the remote side has no effect yet, but the uncertain call may still be running there (uncertain since %s); asking again later", since.Format(time.RFC3339Nano))}}
	}
	// The remote side has nothing: calling again with the same key is safe.
	err = l.update(ctx, e, Failed, "", "reconciled: the remote side has no effect for this key", true, Uncertain)
	if err == nil {
		l.observeReconciled(e, "absent")
	}
	return "", err == nil, err
}

// observeReconciled times e's reconciliation, found being what the
// remote side had: from when the call first turned uncertain.
func (l *Ledger) observeReconciled(e Effect, found string) {
	since := e.UpdatedAt
	if e.UncertainAt != nil {
		since = *e.UncertainAt
	}
	l.reconcileTime.WithLabelValues(e.Consumer, e.Action, found).Observe(max(l.cfg.Now().Sub(since).Seconds(), 0))
}

// callResult is the seqbox_effects_calls_total result of a call recorded
// in state st.
func callResult(st State) string {
	switch st {
	case Succeeded:
		return "succeeded"
	case Failed:
		return "refused"
	}
	return "uncertain"
}

// safeCall runs call, turning a panic into an error: the call may have
// reached the remote side before it panicked, so it is uncertain.
func safeCall(ctx context.Context, call Call, key string) (ref string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the call panicked: %v", r)
		}
	}()
	return call(ctx, key)
}
