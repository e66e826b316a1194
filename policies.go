package seqbox

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/seqbox/seqbox/store"
)

// HeartbeatEvery is how often Run refreshes a consumer's heartbeat.
const HeartbeatEvery = 5 * time.Second

// LiveWithin is how recent a heartbeat must be for a consumer to count as
// running: three missed heartbeats and it is presumed gone.
const LiveWithin = 3 * HeartbeatEvery

// Policies is the part of a Config a consumer registers in the database,
// so that operator commands know how it orders and retries without being
// told again. Durations are Go duration strings ("5m0s").
type Policies struct {
	GapPolicy    GapPolicy        `json:"gap_policy"`
	HoldTimeout  string           `json:"hold_timeout"`
	HoldExpiry   HoldExpiry       `json:"hold_expiry"`
	FirstVersion *int64           `json:"first_version"`
	OnDeadLetter DeadLetterPolicy `json:"on_dead_letter"`
	MaxBlock     string           `json:"max_block"`
	MaxAge       string           `json:"max_age"`
	MaxAttempts  int              `json:"max_attempts"`
	Retention    string           `json:"retention"`
	// RedeliveryWindow, DLQRetention and RedriveWindow are the windows
	// Retention was validated against (docs/design.md §5), so that a tool that
	// purges for the consumer validates the same policy. Empty in a
	// registration written by a seqbox that did not record them.
	RedeliveryWindow string `json:"redelivery_window"`
	DLQRetention     string `json:"dlq_retention"`
	RedriveWindow    string `json:"redrive_window"`
}

// Policies is what c registers: its ordering and retry policy.
func (c *Config) Policies() Policies {
	return Policies{
		GapPolicy: c.GapPolicy, HoldTimeout: c.HoldTimeout.String(), HoldExpiry: c.HoldExpiry,
		FirstVersion: c.FirstVersion, OnDeadLetter: c.OnDeadLetter, MaxBlock: c.MaxBlock.String(),
		MaxAge: c.MaxAge.String(), MaxAttempts: c.Retry.MaxAttempts, Retention: c.Retention.String(),
		RedeliveryWindow: c.RedeliveryWindow.String(), DLQRetention: c.DLQRetention.String(), RedriveWindow: c.RedriveWindow.String(),
	}
}

// Apply sets the policy fields of cfg from p, so that a consumer built from
// a registration orders and retries as the registered one did.
func (p Policies) Apply(cfg *Config) error {
	durations := []struct {
		name string
		text string
		dst  *time.Duration
	}{
		{"hold_timeout", p.HoldTimeout, &cfg.HoldTimeout}, {"max_block", p.MaxBlock, &cfg.MaxBlock},
		{"max_age", p.MaxAge, &cfg.MaxAge}, {"retention", p.Retention, &cfg.Retention},
		{"redelivery_window", p.RedeliveryWindow, &cfg.RedeliveryWindow}, {"dlq_retention", p.DLQRetention, &cfg.DLQRetention},
		{"redrive_window", p.RedriveWindow, &cfg.RedriveWindow},
	}
	for _, d := range durations {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil {
			return fmt.Errorf("registered policy %s %q: %w", d.name, d.text, err)
		}
		*d.dst = v
	}
	cfg.GapPolicy, cfg.HoldExpiry, cfg.OnDeadLetter = p.GapPolicy, p.HoldExpiry, p.OnDeadLetter
	cfg.FirstVersion, cfg.Retry.MaxAttempts = p.FirstVersion, p.MaxAttempts
	return nil
}

// RegisteredPolicies decodes the policies of a registration.
func RegisteredPolicies(r store.Registration) (Policies, error) {
	var p Policies
	if err := json.Unmarshal(r.Policies, &p); err != nil {
		return p, fmt.Errorf("consumer %q: registered policies are not readable: %w", r.Consumer, err)
	}
	return p, nil
}
