package seqboxtype

import "time"

// Result is the outcome reached for one delivery, as reported to
// Config.Observer, the CLI and the gateway.
type Result struct {
	// Source is the event's source; for a rejected envelope, what could be
	// read of it (empty when it could not, or when it is what is invalid).
	Source string `json:"source"`
	// ID is the event's id; for a rejected envelope, as Source.
	ID string `json:"id"`
	// PartitionKey is the event's partitionkey ("" for none); for a
	// rejected envelope, as Source.
	PartitionKey string `json:"partitionkey"`
	// ObjectVersion is the event's objectversion: nil when it has none,
	// and for a rejected envelope.
	ObjectVersion *int64 `json:"objectversion"`
	// Outcome is the outcome the delivery ended in (docs/design.md §4).
	Outcome Outcome `json:"outcome"`
	// Reason explains every outcome but applied.
	Reason string `json:"reason"`
	// Attempt is the delivery attempt the outcome was reached on.
	Attempt int `json:"-"`
	// KeyConflict marks a Retry caused by a concurrent key conflict (another
	// consumer moved the key first): redelivered at once, counted apart.
	KeyConflict bool `json:"-"`
	// BeforeBaseline marks a Stale whose version is lower than its key's
	// baseline, the first version seen: with no FirstVersion configured,
	// it arrived after a later version started the key. Counted apart.
	BeforeBaseline bool `json:"-"`
	// RetryAfter, when set, is how long a Retry waits that is nobody's
	// failure (its decision is in flight elsewhere): not counted as an
	// attempt.
	RetryAfter time.Duration `json:"-"`
	// Occurred is the event's time attribute, when the fact happened (zero
	// when it has none), and Published when it was published: its
	// publishedat attribute, or the broker's publish time (zero when
	// neither is known). The lag metrics read them.
	Occurred, Published time.Time `json:"-"`
}
