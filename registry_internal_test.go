package seqbox

import (
	"testing"

	"github.com/seqbox/seqbox/internal/policy"
	"github.com/stretchr/testify/require"
)

// policy.Policies compare by value; a policy the registration does not record
// (written by an older seqbox) agrees with any value.
func TestPolicyMismatch(t *testing.T) {
	cfg := Config{}
	cfg = cfg.WithDefaults()
	ours := cfg.policies()
	same := ours
	same.Retention, same.HoldTimeout = "720h", "5m"
	name, _, _ := policyMismatch(ours, same)
	require.Empty(t, name, "720h is 720h0m0s")

	old := ours
	old.RedeliveryWindow, old.DLQRetention, old.RedriveWindow = "", "", ""
	name, _, _ = policyMismatch(ours, old)
	require.Empty(t, name, "windows not recorded agree")

	fv := int64(1)
	for _, c := range []struct {
		mutate            func(*policy.Policies)
		name, ours, their string
	}{
		{func(p *policy.Policies) { p.GapPolicy = string(GapAdvance) }, "gap_policy", "hold", "advance"},
		{func(p *policy.Policies) { p.FirstVersion = &fv }, "first_version", "none", "1"},
		{func(p *policy.Policies) { p.MaxAttempts = 9 }, "max_attempts", "5", "9"},
		{func(p *policy.Policies) { p.DLQRetention = "1h" }, "dlq_retention", "336h0m0s", "1h"},
		{func(p *policy.Policies) { p.MaxAge = "soon" }, "max_age", "0s", "soon"},
	} {
		theirs := ours
		c.mutate(&theirs)
		name, a, b := policyMismatch(ours, theirs)
		require.Equal(t, []string{c.name, c.ours, c.their}, []string{name, a, b})
	}
}
