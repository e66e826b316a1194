// Package policy is a consumer's policies as its registration records
// them in the database (seqbox_consumers.policies, JSON), so that operator
// commands know how it orders and retries without being told again, and a
// consumer of the same name can check that it agrees. The root package
// writes them from a Config; the CLI reads them.
package policy

import (
	"encoding/json"
	"fmt"

	"github.com/seqbox/seqbox/store"
)

// Policies is the part of a Config a consumer registers in the database,
// so that operator commands know how it orders and retries without being
// told again. Durations are Go duration strings ("5m0s").
type Policies struct {
	GapPolicy    string `json:"gap_policy"`
	HoldTimeout  string `json:"hold_timeout"`
	HoldExpiry   string `json:"hold_expiry"`
	FirstVersion *int64 `json:"first_version"`
	OnDeadLetter string `json:"on_dead_letter"`
	MaxBlock     string `json:"max_block"`
	MaxAge       string `json:"max_age"`
	MaxAttempts  int    `json:"max_attempts"`
	Retention    string `json:"retention"`
	// RedeliveryWindow, DLQRetention and RedriveWindow are the windows
	// Retention was validated against (docs/design.md §5), so that a tool that
	// purges for the consumer validates the same policy. Empty in a
	// registration written by a seqbox that did not record them.
	RedeliveryWindow string `json:"redelivery_window"`
	DLQRetention     string `json:"dlq_retention"`
	RedriveWindow    string `json:"redrive_window"`
}

// Registered decodes the policies of a registration.
func Registered(r store.Registration) (Policies, error) {
	var p Policies
	if err := json.Unmarshal(r.Policies, &p); err != nil {
		return p, fmt.Errorf("consumer %q: registered policies are not readable: %w", r.Consumer, err)
	}
	return p, nil
}
