package seqbox

import (
	"testing"
	"time"

	"github.com/seqbox/seqbox/store"
	"github.com/stretchr/testify/require"
)

// Policies compare by value; a policy the registration does not record
// (written by an older seqbox) agrees with any value.
func TestPolicyMismatch(t *testing.T) {
	cfg := Config{}
	cfg = cfg.WithDefaults()
	ours := cfg.Policies
	registered := func(js string) (Policies, error) {
		theirs := ours
		err := theirs.readRegistration(store.Registration{Consumer: "c", Policies: []byte(js)})
		return theirs, err
	}
	same, err := registered(`{"retention":"720h","hold_timeout":"5m"}`)
	require.NoError(t, err)
	name, _, _ := policyMismatch(ours, same)
	require.Empty(t, name, "720h is 720h0m0s")

	old, err := registered(`{"gap_policy":"hold","redelivery_window":"","dlq_retention":""}`)
	require.NoError(t, err)
	name, _, _ = policyMismatch(ours, old)
	require.Empty(t, name, "windows not recorded agree")

	fv := int64(1)
	for _, c := range []struct {
		mutate            func(*Policies)
		name, ours, their string
	}{
		{func(p *Policies) { p.GapPolicy = GapAdvance }, "gap_policy", "hold", "advance"},
		{func(p *Policies) { p.FirstVersion = &fv }, "first_version", "none", "1"},
		{func(p *Policies) { p.Retry.MaxAttempts = 9 }, "max_attempts", "5", "9"},
		{func(p *Policies) { p.DLQRetention = time.Hour }, "dlq_retention", "336h0m0s", "1h0m0s"},
	} {
		theirs := ours
		c.mutate(&theirs)
		name, a, b := policyMismatch(ours, theirs)
		require.Equal(t, []string{c.name, c.ours, c.their}, []string{name, a, b})
	}

	_, err = registered(`{"max_age":"soon"}`)
	require.ErrorContains(t, err, `registered policy max_age "soon"`)
}
