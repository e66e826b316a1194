package seqbox

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Policies compare by value; a policy the registration does not record
// (written by an older seqbox) agrees with any value.
func TestPolicyMismatch(t *testing.T) {
	cfg := Config{}
	cfg = cfg.WithDefaults()
	ours := cfg.Policies()
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
		mutate            func(*Policies)
		name, ours, their string
	}{
		{func(p *Policies) { p.GapPolicy = GapAdvance }, "gap_policy", "hold", "advance"},
		{func(p *Policies) { p.FirstVersion = &fv }, "first_version", "none", "1"},
		{func(p *Policies) { p.MaxAttempts = 9 }, "max_attempts", "5", "9"},
		{func(p *Policies) { p.DLQRetention = "1h" }, "dlq_retention", "336h0m0s", "1h"},
		{func(p *Policies) { p.MaxAge = "soon" }, "max_age", "0s", "soon"},
	} {
		theirs := ours
		c.mutate(&theirs)
		name, a, b := policyMismatch(ours, theirs)
		require.Equal(t, []string{c.name, c.ours, c.their}, []string{name, a, b})
	}
}
