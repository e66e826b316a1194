package seqbox

import (
	"log/slog"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/seqbox/seqbox/seqboxtype"
	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/transport"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a Consumer. Name, Store and Handler (or BatchHandler)
// are required, and Transport for Run and RunUntilIdle (Deliver and the
// operator actions take none); everything else has a default that
// favours correctness.
type Config struct {
	// Name is the consumer's logical name; it is part of every identity,
	// so independent consumers of one event each apply it once.
	Name string
	// Store is where the inbox lives.
	Store store.Store
	// Transport delivers the messages to Run and RunUntilIdle.
	Transport transport.Transport
	// Handler applies one event inside the inbox transaction. Set it or
	// BatchHandler, not both.
	Handler Handler
	// BatchHandler applies the events of a batch with one call inside the
	// inbox transaction (see BatchHandler), for effects written in bulk.
	BatchHandler BatchHandler
	// Decide, when set, is the slow and non-deterministic half of the work
	// (an AI model call, an agent's HTTP call). It runs outside any
	// transaction, and only when the event is next on its key: the
	// pipeline first takes the message through the inbox, the business
	// key check and the ordering gate, and an event that would not apply
	// (a duplicate, a semantic duplicate, stale, held, blocked, expired)
	// is never decided. The event then holds its key's turn in the store
	// until its outcome is final, so its successors wait behind it, across retries
	// and crashes. Its result is recorded under the message's identity
	// before Handler runs; the handler reads it with DecisionFrom. A
	// redelivery after a crash re-applies the recorded decision instead of
	// asking again and perhaps deciding differently. A panic in Decide is
	// a permanent failure of that message.
	Decide Decider
	// DecideTimeout bounds one Decide call. Default 2m.
	DecideTimeout time.Duration
	// DecideConcurrency bounds the Decide calls running at once in this
	// consumer (a model API's rate limit, an agent's capacity). Default 64
	// (DefaultDecideConcurrency).
	DecideConcurrency int
	// ClaimHeartbeat is how often a decision in flight renews its claim
	// in the store. While it is renewed, a redelivery elsewhere (the lease
	// ran out, another consumer received it) waits for the recorded
	// decision instead of asking the model again; a claim whose decider
	// died (its heartbeat stopped) is taken over after three heartbeats.
	// Default 1s.
	ClaimHeartbeat time.Duration
	// ExtendEvery is how often the leases of deliveries in flight are
	// extended, so long handlers keep their messages. Default 10s.
	ExtendEvery time.Duration
	// ExtendBy is how far each extension pushes the lease. Default 30s.
	ExtendBy time.Duration

	// Workers is the number of goroutines applying batches; keys are
	// spread over them and a key is pinned to one worker at a time.
	// With Decide, Run applies the decided messages on one more
	// goroutine, all that were decided while its last transaction
	// committed in the next (docs/design.md §10.1); Workers do not
	// divide that work. Default 4.
	Workers int
	// BatchSize is the most deliveries one transaction holds: a worker
	// takes what is ready, up to BatchSize, so batches grow with the load
	// (group commit: one fsync for many messages) and stay small when it
	// is light. Default 512.
	BatchSize int
	// TargetLatency is the receive→commit latency Run aims for. It
	// bounds how large a batch grows: from the batches committed so far
	// Run learns what a message adds to its batch's time (apart from
	// the fixed part every batch pays), and a batch holds as many
	// messages as add up to half the target. When the oldest waiting
	// delivery is already past the target, batches grow to BatchSize
	// to work off a backlog fastest. A delivery waits for its batch to
	// fill only while another batch runs, a quarter of the target at
	// most (group commit; none with Decide, or on a store with one
	// writer, which runs one batch at a time). Default
	// DefaultTargetLatency; negative: batches of up to BatchSize
	// whatever their latency (throughput first), nothing held.
	TargetLatency time.Duration

	// Policies are how the consumer orders, retries and retains: GapPolicy,
	// HoldTimeout, Retry, Retention and the rest, set as cfg.GapPolicy
	// (embedded). Consumers of one name must share them.
	Policies

	// VolatileAttributes are left out of the payload hash in addition to
	// seqboxtype.DefaultVolatileAttributes() (publishedat, traceparent, ...).
	VolatileAttributes []string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger
	// Observer, when set, is told every result after its commit.
	Observer func(seqboxtype.Result)
	// Metrics, when set, counts outcomes and latencies.
	Metrics *Metrics
	// TracerProvider starts the consumer's OpenTelemetry spans: receive,
	// process (one per message, with its outcome) and settle, continuing
	// the producer's trace from the envelope's traceparent
	// (docs/design.md §22). Default otel.GetTracerProvider(), which
	// records nothing until the program installs a provider.
	TracerProvider trace.TracerProvider
}

// DefaultDecideConcurrency is Config.DecideConcurrency's default: 64, by
// measurement (docs/benchmarks.md, "The agent path: seqbox bench agent"):
// against an agent that answers in 300 ms, 64 calls in flight keep about
// 0.9 of the ideal rate, and an instant agent gains nothing beyond 64; a
// model API's limit allows that many, while an agent that allows fewer
// says so with --agent-concurrency (or 429 and Retry-After).
const DefaultDecideConcurrency = 64

// DefaultTargetLatency is Config.TargetLatency's default.
const DefaultTargetLatency = 20 * time.Millisecond

// DefaultBatchSize is Config.BatchSize's default.
const DefaultBatchSize = 512

// The largest sizes Validate accepts: each is far beyond what helps (a
// batch's statements grow with it, and workers share one database),
// and beyond them the consumer's own arithmetic and memory would not
// hold (Workers × BatchSize deliveries are received ahead).
const (
	// MaxWorkers is the largest Config.Workers.
	MaxWorkers = 1024
	// MaxBatchSize is the largest Config.BatchSize.
	MaxBatchSize = 1 << 16
	// MaxDecideConcurrency is the largest Config.DecideConcurrency.
	MaxDecideConcurrency = 1 << 16
	// MaxRetryAttempts is the largest Retry.MaxAttempts: about a billion
	// deliveries, where the crash-loop bound (crashLoopFactor times it,
	// in 64 bits) still fits. Beyond 2^61 that bound wrapped negative and
	// every message was dead-lettered on its first delivery.
	MaxRetryAttempts = 1 << 30
)

// WithDefaults returns c with every unset field at its default: what a
// Consumer built from c runs with.
func (c *Config) WithDefaults() Config {
	out := *c
	if out.ExtendEvery <= 0 {
		out.ExtendEvery = 10 * time.Second
	}
	if out.DecideTimeout <= 0 {
		out.DecideTimeout = 2 * time.Minute
	}
	if out.DecideConcurrency <= 0 {
		out.DecideConcurrency = DefaultDecideConcurrency
	}
	if out.ClaimHeartbeat <= 0 {
		out.ClaimHeartbeat = time.Second
	}
	if out.ExtendBy <= 0 {
		out.ExtendBy = 30 * time.Second
	}
	if out.Workers <= 0 {
		out.Workers = 4
	}
	if out.BatchSize <= 0 {
		out.BatchSize = DefaultBatchSize
	}
	if out.TargetLatency == 0 {
		out.TargetLatency = DefaultTargetLatency
	}
	out.Policies = out.Policies.withDefaults()
	out.VolatileAttributes = append(seqboxtype.DefaultVolatileAttributes(), c.VolatileAttributes...)
	if out.Now == nil {
		out.Now = time.Now
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out
}

// Validate reports the first problem with the configuration, naming the
// field. It checks the configuration with defaults applied. Transport is
// not checked: only Run needs one (Deliver and the operator actions do
// not).
func (c *Config) Validate() error {
	if err := c.validateGiven(); err != nil {
		return err
	}
	d := c.WithDefaults()
	if err := c.validateBackoff(d); err != nil {
		return err
	}
	return d.validate()
}

// ValidateSettings reports the first problem with the configuration's
// name, policies and sizes, as Validate does, leaving out what only an
// opened database gives (Store) and the handler: a command checks its
// flags with it before it opens, creates or migrates a database, so that
// a refused flag leaves nothing behind.
func (c *Config) ValidateSettings() error {
	if err := c.validateGiven(); err != nil {
		return err
	}
	d := c.WithDefaults()
	if err := c.validateBackoff(d); err != nil {
		return err
	}
	return d.validateSettings()
}

// validateBackoff refuses a first retry delay longer than its cap (d is c
// with defaults applied): every retry would then wait the cap, which is
// not what either value says. A cap left unset is named as the default.
func (c *Config) validateBackoff(d Config) error {
	if d.Retry.InitialBackoff <= d.Retry.MaxBackoff {
		return nil
	}
	capNote := ""
	if c.Retry.MaxBackoff == 0 {
		capNote = " (the default)"
	}
	return invalidConfig("Retry.InitialBackoff", "%s is longer than Retry.MaxBackoff %s%s: the first retry's delay is at most the cap",
		d.Retry.InitialBackoff, d.Retry.MaxBackoff, capNote)
}

// validateGiven refuses what defaults would otherwise hide: a negative
// duration or count is a mistake, not a request for the default.
func (c *Config) validateGiven() error {
	if err := validName(c.Name); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ExtendEvery", c.ExtendEvery}, {"ExtendBy", c.ExtendBy}, {"DecideTimeout", c.DecideTimeout}, {"ClaimHeartbeat", c.ClaimHeartbeat}, {"HoldTimeout", c.HoldTimeout},
		{"MaxBlock", c.MaxBlock}, {"MaxAge", c.MaxAge}, {"Retention", c.Retention},
		{"RedeliveryWindow", c.RedeliveryWindow}, {"DLQRetention", c.DLQRetention}, {"RedriveWindow", c.RedriveWindow},
		{"Retry.InitialBackoff", c.Retry.InitialBackoff}, {"Retry.MaxBackoff", c.Retry.MaxBackoff},
	} {
		if d.v < 0 {
			return invalidConfig(d.name, "%s is negative", d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"Workers", c.Workers}, {"BatchSize", c.BatchSize}, {"DecideConcurrency", c.DecideConcurrency}, {"Retry.MaxAttempts", c.Retry.MaxAttempts}} {
		if n.v < 0 {
			return invalidConfig(n.name, "%d is negative", n.v)
		}
	}
	for _, n := range []struct {
		name   string
		v, max int
	}{{"Workers", c.Workers, MaxWorkers}, {"BatchSize", c.BatchSize, MaxBatchSize}, {"DecideConcurrency", c.DecideConcurrency, MaxDecideConcurrency},
		{"Retry.MaxAttempts", c.Retry.MaxAttempts, MaxRetryAttempts}} {
		if n.v > n.max {
			return invalidConfig(n.name, "%d is more than the %d seqbox takes", n.v, n.max)
		}
	}
	return nil
}

// addSaturating is a + b for durations that are not negative, at most
// the largest duration: a sum that overflowed would be negative and pass
// any check it is compared in.
func addSaturating(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// validName holds a consumer name to the limits every store can index, so
// that a name fails the same way on SQLite and PostgreSQL.
func validName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return invalidConfig("Name", "required: it is part of every identity")
	case !utf8.ValidString(name):
		return invalidConfig("Name", "%q is not valid UTF-8", name)
	case len(name) > seqboxtype.MaxAttributeSize:
		return invalidConfig("Name", "is %d bytes, longer than the %d-byte limit", len(name), seqboxtype.MaxAttributeSize)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return invalidConfig("Name", "%q contains a control character", name)
		}
	}
	return nil
}

func (c *Config) validate() error {
	switch {
	case c.Store == nil:
		return invalidConfig("Store", "required")
	case c.Handler == nil && c.BatchHandler == nil:
		return invalidConfig("Handler", "required (or BatchHandler)")
	case c.Handler != nil && c.BatchHandler != nil:
		return invalidConfig("BatchHandler", "set Handler or BatchHandler, not both")
	case c.BatchHandler != nil && c.Decide != nil:
		return invalidConfig("BatchHandler", "cannot be combined with Decide: a recorded decision belongs to one event's Handler")
	}
	return c.validateSettings()
}

// validateSettings checks the policies of a configuration with defaults
// applied: everything validate checks but the Store and the handler.
func (c *Config) validateSettings() error {
	if c.GapPolicy != GapHold && c.GapPolicy != GapAdvance {
		return invalidConfig("GapPolicy", "%q is not hold or advance", c.GapPolicy)
	}
	if c.HoldExpiry != HoldExpiryBlock && c.HoldExpiry != HoldExpiryAdvance {
		return invalidConfig("HoldExpiry", "%q is not block or advance", c.HoldExpiry)
	}
	if c.OnDeadLetter != DeadLetterBlock && c.OnDeadLetter != DeadLetterRelease {
		return invalidConfig("OnDeadLetter", "%q is not block or release", c.OnDeadLetter)
	}
	if c.FirstVersion != nil && *c.FirstVersion < 0 {
		return invalidConfig("FirstVersion", "%d is negative", *c.FirstVersion)
	}
	if c.MaxBlock < 0 || c.MaxAge < 0 {
		return invalidConfig("MaxBlock/MaxAge", "must not be negative")
	}
	if c.Retention < c.RedeliveryWindow {
		return invalidConfig("Retention", "%s is shorter than the broker's redelivery window %s: a redelivery would look new",
			c.Retention, c.RedeliveryWindow)
	}
	if c.Retention < addSaturating(c.DLQRetention, c.RedriveWindow) {
		return invalidConfig("Retention", "%s is shorter than DLQ retention %s plus redrive window %s: a redrive would look new",
			c.Retention, c.DLQRetention, c.RedriveWindow)
	}
	return nil
}
