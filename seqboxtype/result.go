package seqboxtype

import "time"

// Result is the outcome reached for one delivery, as reported to
// Config.Observer, the CLI and the gateway.
type Result struct {
	Source        string  `json:"source"`
	ID            string  `json:"id"`
	PartitionKey  string  `json:"partitionkey"`
	ObjectVersion *int64  `json:"objectversion"`
	Outcome       Outcome `json:"outcome"`
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
}
