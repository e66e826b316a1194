package seqbox

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/seqbox/seqbox/internal/engine"
	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
)

// The public types are declared in seqboxtype, the leaf package the engine
// shares (as river's rivertype); these are the names to use.
type (
	// Event is a CloudEvents 1.0 envelope in structured JSON mode, with
	// the extension attributes seqbox uses for identity, ordering and
	// business deduplication.
	// Its fields are documented at seqboxtype.Event.
	Event = seqboxtype.Event
	// InvalidEventError is why an envelope was refused, naming the field.
	// Its fields are documented at seqboxtype.InvalidEventError.
	InvalidEventError = seqboxtype.InvalidEventError
	// Config is a consumer's configuration: its store, transport, handler
	// and ordering, retry and retention policies.
	// Its fields are documented at seqboxtype.Config.
	Config = seqboxtype.Config
	// RetryPolicy is how often and how soon a failed handler is retried.
	// Its fields are documented at seqboxtype.RetryPolicy.
	RetryPolicy = seqboxtype.RetryPolicy
	// GapPolicy is what the gate does when a version is missing.
	GapPolicy = seqboxtype.GapPolicy
	// HoldExpiry is what happens when a held message's hold times out.
	HoldExpiry = seqboxtype.HoldExpiry
	// DeadLetterPolicy is what a dead-lettered message does to its key.
	DeadLetterPolicy = seqboxtype.DeadLetterPolicy
	// Tx is the transaction a Handler writes its business effects in.
	Tx = seqboxtype.Tx
	// Handler applies one event inside the inbox transaction.
	Handler = seqboxtype.Handler
	// BatchHandler applies a batch's applied events in one call inside the
	// inbox transaction.
	BatchHandler = seqboxtype.BatchHandler
	// Decider is the half of an agent's step that runs outside the
	// transaction; its result is recorded once per identity.
	Decider = seqboxtype.Decider
	// Result is the outcome reached for one delivery.
	// Its fields are documented at seqboxtype.Result.
	Result = seqboxtype.Result
	// Identity names the message a Decider or Handler is working on.
	// Its fields are documented at seqboxtype.Identity.
	Identity = seqboxtype.Identity
	// Oversized is an input too large to hand over whole.
	// Its fields are documented at seqboxtype.Oversized.
	Oversized = seqboxtype.Oversized
	// Metrics are the Prometheus collectors a Consumer updates.
	// Its fields are documented at seqboxtype.Metrics.
	Metrics = seqboxtype.Metrics
	// Policies is the part of a Config a consumer registers in the
	// database.
	// Its fields are documented at seqboxtype.Policies.
	Policies = seqboxtype.Policies
)

// The ordering policies (see GapPolicy, HoldExpiry and DeadLetterPolicy).
const (
	GapHold           = seqboxtype.GapHold
	GapAdvance        = seqboxtype.GapAdvance
	HoldExpiryBlock   = seqboxtype.HoldExpiryBlock
	HoldExpiryAdvance = seqboxtype.HoldExpiryAdvance
	DeadLetterBlock   = seqboxtype.DeadLetterBlock
	DeadLetterRelease = seqboxtype.DeadLetterRelease
)

// Limits and defaults.
const (
	// MaxEventSize is the largest envelope accepted, in bytes.
	MaxEventSize = seqboxtype.MaxEventSize
	// MaxAttributeSize is the largest identity or key attribute, in bytes.
	MaxAttributeSize = seqboxtype.MaxAttributeSize
	// DefaultBatchSize is Config.BatchSize's default.
	DefaultBatchSize = seqboxtype.DefaultBatchSize
	// DefaultDecideConcurrency is Config.DecideConcurrency's default.
	DefaultDecideConcurrency = seqboxtype.DefaultDecideConcurrency
	// DefaultPurgeBatch is Purge's default batch.
	DefaultPurgeBatch = engine.DefaultPurgeBatch
	// LiveWithin is how recent a heartbeat must be for a consumer to count
	// as running.
	LiveWithin = seqboxtype.LiveWithin
)

// DefaultVolatileAttributes are left out of the payload hash: they may
// differ between publications of the same fact (DESIGN §1).
var DefaultVolatileAttributes = seqboxtype.DefaultVolatileAttributes

// Errors.
var (
	// ErrInvalidEvent is matched by every envelope refused as invalid.
	ErrInvalidEvent = seqboxtype.ErrInvalidEvent
	// ErrInvalidConfig is matched by every configuration refused.
	ErrInvalidConfig = seqboxtype.ErrInvalidConfig
	// ErrBlockedByDeadLetter: ReleaseKey was asked for a key blocked behind
	// a dead letter; redrive or skip it instead.
	ErrBlockedByDeadLetter = engine.ErrBlockedByDeadLetter
	// ErrNotBlocking: the dead letter was already resolved.
	ErrNotBlocking = engine.ErrNotBlocking
	// ErrBeingDecided: Skip of a dead letter whose redrive is deciding it
	// right now; skip it once the redrive's result is in.
	ErrBeingDecided = engine.ErrBeingDecided
	// ErrPolicyConflict is matched by the error of a consumer that
	// registers (Run, or its first delivery) while a live consumer of the
	// same name, its heartbeat within LiveWithin, is registered with
	// different policies. A stale registration is replaced.
	ErrPolicyConflict = engine.ErrPolicyConflict
)

// ParseEvent parses and validates a structured-mode CloudEvent and computes
// its payload hash with DefaultVolatileAttributes excluded; errors name the
// field (see seqboxtype.ParseEvent).
func ParseEvent(raw []byte) (Event, error) { return seqboxtype.ParseEvent(raw) }

// Permanent wraps err so the pipeline dead-letters the delivery at once
// instead of retrying it. Permanent(nil) is nil.
func Permanent(err error) error { return seqboxtype.Permanent(err) }

// IsPermanent reports whether err, or any error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool { return seqboxtype.IsPermanent(err) }

// RetryAfter wraps a transient err with the delay the remote side asked
// for (HTTP 429 or 503 with Retry-After): the attempt counts, and the
// next comes no sooner than after, within Retry.MaxBackoff.
func RetryAfter(err error, after time.Duration) error { return seqboxtype.RetryAfter(err, after) }

// Settle is what a Handler returns when the system it writes to says the
// event is already superseded: outcome Stale or VersionConflict (see
// seqboxtype.Settle).
func Settle(outcome Outcome, reason string) error { return seqboxtype.Settle(outcome, reason) }

// DecisionFrom returns the decision Config.Decide recorded for the event the
// handler is applying.
func DecisionFrom(ctx context.Context) ([]byte, bool) { return seqboxtype.DecisionFrom(ctx) }

// IdentityFrom returns the identity of the message the context belongs to,
// when it is a Decider's or a Handler's context.
func IdentityFrom(ctx context.Context) (Identity, bool) { return seqboxtype.IdentityFrom(ctx) }

// NewMetrics creates the collectors and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics { return seqboxtype.NewMetrics(reg) }

// RegisteredPolicies reads the policies a consumer registered.
func RegisteredPolicies(r store.Registration) (Policies, error) {
	return seqboxtype.RegisteredPolicies(r)
}
