package seqbox

import "github.com/seqbox/seqbox/store/state"

// Outcome is the result the pipeline reaches for one delivery. The set is
// closed: every delivery ends in exactly one of these, and the same names
// appear in the audit log, metrics labels, CLI and HTTP output. It is
// store/state's Outcome, which the store writes to its rows.
type Outcome = state.Outcome

// The outcomes, in the order DESIGN §2 lists them.
const (
	// Applied: a new identity passed every gate, the handler succeeded and
	// the transaction committed. The effect happened exactly once.
	Applied = state.Applied
	// Duplicate: this consumer already recorded the identity with the same
	// payload hash. Acknowledged with no effect.
	Duplicate = state.Duplicate
	// Collision: the identity was recorded with a different payload hash.
	// The second payload is parked for investigation.
	Collision = state.Collision
	// SemanticDuplicate: a new identity asked for a business key this
	// consumer already applied.
	SemanticDuplicate = state.SemanticDuplicate
	// Stale: the event's object version is older than the key's current
	// version. Recorded and never retried.
	Stale = state.Stale
	// VersionConflict: the event's object version equals the key's current
	// version under a different identity. Parked for investigation.
	VersionConflict = state.VersionConflict
	// Held: a version gap; the event is parked durably until the missing
	// version arrives or the hold deadline passes.
	Held = state.Held
	// Expired: the event is older than the consumer's business deadline.
	Expired = state.Expired
	// Blocked: the event's key is blocked by an earlier failed message; the
	// event is parked behind it.
	Blocked = state.Blocked
	// Retry: the handler failed transiently and attempts remain; the
	// delivery is nacked with backoff.
	Retry = state.Retry
	// DeadLettered: the handler failed permanently or used up its attempts;
	// the original envelope is in the DLQ.
	DeadLettered = state.DeadLettered
	// Rejected: the envelope is invalid. The bytes go to the DLQ with the
	// reason.
	Rejected = state.Rejected
)

// Outcomes returns every outcome in a fixed order, for counters and tables
// that must list them all, zeros included.
func Outcomes() []Outcome { return state.Outcomes() }
