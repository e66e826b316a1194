package seqboxtype

// Outcome is the result the pipeline reaches for one delivery. The set is
// closed: every delivery ends in exactly one of these, and the same names
// appear in the audit log, metrics labels, CLI and HTTP output.
type Outcome string

// The outcomes, in the order docs/design.md §4 lists them.
const (
	// Applied: a new identity passed every gate, the handler succeeded and
	// the transaction committed. The effect happened exactly once.
	Applied Outcome = "applied"
	// Duplicate: this consumer already recorded the identity with the same
	// payload hash. Acknowledged with no effect.
	Duplicate Outcome = "duplicate"
	// Collision: the identity was recorded with a different payload hash.
	// The second payload is parked for investigation.
	Collision Outcome = "collision"
	// SemanticDuplicate: a new identity asked for a business key this
	// consumer already applied.
	SemanticDuplicate Outcome = "semantic_duplicate"
	// Stale: the event's object version is older than the key's current
	// version. Recorded and never retried.
	Stale Outcome = "stale"
	// VersionConflict: the event's object version equals the key's current
	// version under a different identity. Parked for investigation.
	VersionConflict Outcome = "version_conflict"
	// Held: a version gap; the event is parked durably until the missing
	// version arrives or the hold deadline passes.
	Held Outcome = "held"
	// Expired: the event is older than the consumer's business deadline.
	Expired Outcome = "expired"
	// Blocked: the event's key is blocked by an earlier failed message; the
	// event is parked behind it.
	Blocked Outcome = "blocked"
	// Retry: the handler failed transiently and attempts remain; the
	// delivery is nacked with backoff.
	Retry Outcome = "retry"
	// DeadLettered: the handler failed permanently or used up its attempts;
	// the original envelope is in the DLQ.
	DeadLettered Outcome = "dead_lettered"
	// Rejected: the envelope is invalid. The bytes go to the DLQ with the
	// reason.
	Rejected Outcome = "rejected"
)

// Outcomes returns every outcome in a fixed order, for counters and tables
// that must list them all, zeros included.
func Outcomes() []Outcome {
	return []Outcome{Applied, Duplicate, Collision, SemanticDuplicate, Stale,
		VersionConflict, Held, Expired, Blocked, Retry, DeadLettered, Rejected}
}

// Valid reports whether o is one of the closed set of outcome names.
func (o Outcome) Valid() bool {
	for _, x := range Outcomes() {
		if x == o {
			return true
		}
	}
	return false
}

// Acks reports whether the broker copy is acknowledged after the outcome is
// committed. Only Retry leaves the delivery for redelivery.
func (o Outcome) Acks() bool { return o != Retry }

// String returns the outcome's name.
func (o Outcome) String() string { return string(o) }

// ParkedInsert is why a message sits in the parked table instead of the broker.
type Park string

// The reasons a message is parked.
const (
	// ParkHeld: waiting for a missing earlier version, until a deadline.
	ParkHeld Park = "held"
	// ParkBlocked: behind a failed message of its key.
	ParkBlocked Park = "blocked"
	// ParkCollision: a second payload under a recorded identity.
	ParkCollision Park = "collision"
	// ParkVersionConflict: a second identity for a version already applied.
	ParkVersionConflict Park = "version_conflict"
)

// InLine reports whether a message parked for p is in line behind its key,
// to be unparked when it is next (held or blocked), rather than kept for
// investigation (collision, version conflict).
func (p Park) InLine() bool { return p == ParkHeld || p == ParkBlocked }

// DeadLetter is where a dead-letter row stands.
type DeadLetter string

// The states of a dead-letter row.
const (
	// DeadLetterOpen: waiting for an operator.
	DeadLetterOpen DeadLetter = "open"
	// DeadLetterRedriven: sent back through the pipeline, and settled.
	DeadLetterRedriven DeadLetter = "redriven"
	// DeadLetterRedriveFailed: redriven, and dead-lettered or rejected
	// again (a new row holds it).
	DeadLetterRedriveFailed DeadLetter = "redrive_failed"
	// DeadLetterSkipped: resolved without applying, with who and why.
	DeadLetterSkipped DeadLetter = "skipped"
)

// Request is where an operator request stands.
type Request string

// The states of an operator request.
const (
	// RequestPending: recorded, waiting for the owning consumer.
	RequestPending Request = "pending"
	// RequestRunning: a consumer process took it and is executing it.
	RequestRunning Request = "running"
	// RequestDone: executed; its result holds what the messages reached.
	RequestDone Request = "done"
	// RequestFailed: executed, and it failed; its error says why.
	RequestFailed Request = "failed"
	// RequestCancelled: withdrawn before a consumer took it.
	RequestCancelled Request = "cancelled"
)

// Effect is where one external call of the effects ledger stands.
type Effect string

// The states of a ledger row.
const (
	// EffectPending: committed before the call; the call has not reported
	// back.
	EffectPending Effect = "pending"
	// EffectSucceeded: the remote side applied the effect.
	EffectSucceeded Effect = "succeeded"
	// EffectFailed: the remote side said it did not apply the effect;
	// another attempt may call again with the same idempotency key.
	EffectFailed Effect = "failed"
	// EffectUncertain: nobody knows whether the remote side applied it.
	EffectUncertain Effect = "uncertain"
)
