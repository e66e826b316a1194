package seqbox

import (
	"fmt"
	"time"

	"github.com/seqbox/seqbox/internal/policy"
)

// HeartbeatEvery is how often Run refreshes a consumer's heartbeat.
const HeartbeatEvery = 5 * time.Second

// LiveWithin is how recent a heartbeat must be for a consumer to count as
// running: three missed heartbeats and it is presumed gone.
const LiveWithin = 3 * HeartbeatEvery

// policies is what c registers: its ordering and retry policy.
func (c *Config) policies() policy.Policies {
	return policy.Policies{
		GapPolicy: string(c.GapPolicy), HoldTimeout: c.HoldTimeout.String(), HoldExpiry: string(c.HoldExpiry),
		FirstVersion: c.FirstVersion, OnDeadLetter: string(c.OnDeadLetter), MaxBlock: c.MaxBlock.String(),
		MaxAge: c.MaxAge.String(), MaxAttempts: c.Retry.MaxAttempts, Retention: c.Retention.String(),
		RedeliveryWindow: c.RedeliveryWindow.String(), DLQRetention: c.DLQRetention.String(), RedriveWindow: c.RedriveWindow.String(),
	}
}

// applyPolicies sets the policy fields of cfg from p, so that a consumer
// built from a registration orders and retries as the registered one did.
func applyPolicies(p policy.Policies, cfg *Config) error {
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
	cfg.GapPolicy, cfg.HoldExpiry, cfg.OnDeadLetter = GapPolicy(p.GapPolicy), HoldExpiry(p.HoldExpiry), DeadLetterPolicy(p.OnDeadLetter)
	cfg.FirstVersion, cfg.Retry.MaxAttempts = p.FirstVersion, p.MaxAttempts
	return nil
}
